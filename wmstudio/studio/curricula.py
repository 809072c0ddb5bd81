"""Curricula as Hugging Face datasets: add rollouts to a curriculum version, export it as a dataset folder (and
zip), push it to the hub, and import such a dataset back as new rollouts.

Plain functions over the store; the Rollouts tab and `wmstudio curricula` call them alike."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wmstudio.locations import user_home
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import (
    ROLLOUT_STATUSES,
    Curriculum,
    MadeBy,
    Store,
    append_step,
    create_curriculum_version,
    create_rollout,
    curriculum_rollouts,
    curriculum_snapshots,
    get_curriculum,
    get_world,
    list_curricula,
    save_world_version,
    set_status,
)
from wmstudio.studio.datasets import (
    ExportRollout,
    ExportStep,
    PushFailed,
    export_dataset,
    import_dataset,
    push_to_hub,
)
from wmstudio.world.spec import Call

MAX_IMPORT_BYTES = 1_000_000_000


@dataclass
class ImportResult:
    """What an import created: the new rollouts' ids and how many steps they hold."""

    rollout_ids: list[int]
    steps: int


def add_to_curriculum(store: Store, name: str, description: str, rollout_ids: Sequence[int]) -> tuple[Curriculum, int]:
    """Save the next version of curriculum `name`: its latest rollouts plus `rollout_ids` (accepted only).

    Returns the new version and how many rollouts were added to the previous one."""
    try:
        previous = [r.id for r in curriculum_rollouts(store, get_curriculum(store, (name or "").strip()).id)]
    except InvalidInput:
        previous = []
    curriculum = create_curriculum_version(store, name, previous + list(rollout_ids), description or "")
    return curriculum, len(set(rollout_ids) - set(previous))


def export_rollouts(store: Store, curriculum_id: int) -> list[ExportRollout]:
    """A curriculum version's rollouts as it saved them (later edits to a rollout do not reach it), in the dataset
    module's export shape."""
    exported = []
    for snap in curriculum_snapshots(store, curriculum_id):
        steps = [ExportStep(call=Call.from_json(s["call"], f"rollout {snap.rollout_id}.call"), response=s["response"],
                            check_report=s["check_report"], made_by=s["made_by"]) for s in snap.steps]
        exported.append(ExportRollout(id=str(snap.rollout_id), world=get_world(store, snap.world_id).spec(),
                                      steps=steps, title=snap.title, status=snap.status, tags=list(snap.tags)))
    return exported


def curriculum_by_id(store: Store, curriculum_id: int) -> Curriculum:
    """The curriculum version with this id; InvalidInput when there is none."""
    curriculum = next((s.curriculum for s in list_curricula(store) if s.curriculum.id == curriculum_id), None)
    if curriculum is None:
        raise InvalidInput(Problem("curriculum", f"no curriculum with id {curriculum_id}: pick one in the list"))
    return curriculum


def export_curriculum(store: Store, curriculum_id: int, folder: Path | None = None) -> tuple[Path, str]:
    """Write a curriculum version as a dataset folder (default: `exports/<name>-v<version>` in the user's folder);
    returns the folder and the version's label. The studio and `wmstudio curricula export` both write this."""
    curriculum = curriculum_by_id(store, curriculum_id)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", curriculum.name).strip("-.") or "curriculum"
    folder = Path(folder) if folder is not None else user_home() / "exports" / f"{slug}-v{curriculum.version}"
    name = f"{curriculum.name} v{curriculum.version}"
    export_dataset(export_rollouts(store, curriculum_id), folder, name)
    return folder, name


def zip_folder(folder: Path) -> Path:
    """A zip of an exported folder in a fresh temporary folder (what the studio offers for download)."""
    archive = Path(tempfile.mkdtemp(prefix="wmstudio-export-")) / folder.name
    return Path(shutil.make_archive(str(archive), "zip", root_dir=folder.parent, base_dir=folder.name))


def push_curriculum(store: Store, curriculum_id: int, repo_id: str, token: str | None, private: bool) -> str:
    """Export the curriculum and push it to a Hugging Face dataset repo (token given, or HF_TOKEN); its URL."""
    token = (token or "").strip() or os.environ.get("HF_TOKEN", "")
    if not token:
        raise InvalidInput(Problem("token", "no Hugging Face token: paste a write token or set HF_TOKEN"))
    folder, _ = export_curriculum(store, curriculum_id)
    try:
        return push_to_hub(folder, (repo_id or "").strip(), token, private=bool(private))
    except PushFailed as err:
        raise PushFailed(str(err).replace(token, "***")) from None  # the token never reaches the page or a log


def import_dataset_file(store: Store, path: Path) -> ImportResult:
    """Import an exported dataset (its folder, the zip, its parquet or its JSONL) as new rollouts; worlds are
    saved as versions."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="wmstudio-import-") as scratch:
        source = _unzip_dataset(path, Path(scratch)) if path.suffix.lower() == ".zip" else path
        rollouts = import_dataset(source)
        steps = [[(s, MadeBy.from_json(s.made_by, f"rollouts[{i}].steps[{j}].made_by")) for j, s in enumerate(r.steps)]
                 for i, r in enumerate(rollouts)]
    created = []
    for rollout, made in zip(rollouts, steps, strict=True):
        world = save_world_version(store, rollout.world)
        status = rollout.status if rollout.status in ROLLOUT_STATUSES else "pending"
        row = create_rollout(store, world.id, rollout.title, rollout.tags)
        for step, made_by in made:
            append_step(store, row.id, step.call, step.response, made_by, step.check_report)
        set_status(store, row.id, status)  # after the steps: appending to an accepted rollout un-accepts it
        created.append(row.id)
    return ImportResult(created, sum(map(len, steps)))


def _unzip_dataset(archive: Path, into: Path) -> Path:
    """Extract an exported zip safely (no paths outside, bounded size) and return the dataset folder inside it."""
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if sum(m.file_size for m in members) > MAX_IMPORT_BYTES:
                raise InvalidInput(Problem("file", f"the zip unpacks to over {MAX_IMPORT_BYTES:,} bytes: split it"))
            for member in members:
                target = (into / member.filename).resolve()
                if not target.is_relative_to(into.resolve()):
                    raise InvalidInput(Problem("file", f"the zip holds an unsafe path {member.filename!r}"))
            bundle.extractall(into)
    except zipfile.BadZipFile:
        raise InvalidInput(Problem("file", f"{archive.name} is not a readable zip: upload the zip the export made"))
    for candidate in sorted(into.rglob("data"), key=lambda p: len(p.parts)):
        if candidate.is_dir():
            return candidate.parent
    raise InvalidInput(Problem("file", f"{archive.name} holds no data/ folder: it is not an exported dataset"))
