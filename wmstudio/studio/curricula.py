"""Curricula as Hugging Face datasets from the Rollouts tab: add rollouts to a curriculum version, export it as a
dataset folder (and zip), push it to the hub, and import such a dataset back as new rollouts.

Plain functions over the store; the Rollouts tab lays out their controls."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from wmstudio.locations import user_home
from wmstudio.store import (
    ROLLOUT_STATUSES,
    MadeBy,
    Store,
    append_step,
    create_curriculum_version,
    create_rollout,
    curriculum_rollouts,
    get_curriculum,
    get_world,
    list_curricula,
    rollout_steps,
    rollout_tags,
    save_world_version,
)
from wmstudio.studio.datasets import (
    ExportRollout,
    ExportStep,
    PushFailed,
    export_dataset,
    import_dataset,
    push_to_hub,
)
from wmstudio.problems import InvalidInput, Problem

MAX_IMPORT_BYTES = 1_000_000_000


def add_to_curriculum(store: Store, name: str, description: str, ids_text: str) -> str:
    """Save the next version of curriculum `name`: its latest rollouts plus the listed ones (accepted only)."""
    ids = []
    for i, part in enumerate(p.strip() for p in re.split(r"[,\s]+", ids_text or "") if p.strip()):
        if not part.isdigit():
            raise InvalidInput(Problem(f"rollout_ids[{i}]", f"{part!r} is not a rollout id: list ids like 3, 7, 12"))
        ids.append(int(part))
    try:
        previous = [r.id for r in curriculum_rollouts(store, get_curriculum(store, (name or "").strip()).id)]
    except InvalidInput:
        previous = []
    curriculum = create_curriculum_version(store, name, previous + ids, description or "")
    added = len(set(ids) - set(previous))
    return (f"📚 Curriculum **{curriculum.name}** v{curriculum.version}: {len(set(previous + ids))} rollouts "
            f"({added} added).")


def export_rollouts(store: Store, curriculum_id: int) -> list[ExportRollout]:
    """A curriculum version's rollouts in the dataset module's export shape."""
    exported = []
    for rollout in curriculum_rollouts(store, curriculum_id):
        steps = [ExportStep(call=s.tool_call(), response=s.response, check_report=s.check_report, made_by=s.made_by)
                 for s in rollout_steps(store, rollout.id)]
        exported.append(ExportRollout(id=str(rollout.id), world=get_world(store, rollout.world_id).spec(), steps=steps,
                                      title=rollout.title, status=rollout.status,
                                      tags=rollout_tags(store, rollout.id)))
    return exported


def export_curriculum(store: Store, curriculum_id: Any) -> tuple[str, str]:
    """Write the curriculum as a dataset folder (in the user's exports folder) and zip it; (zip path, message)."""
    if curriculum_id in (None, ""):
        raise InvalidInput(Problem("curriculum", "choose a curriculum version to export"))
    folder, name = _export_folder(store, int(curriculum_id))
    archive = Path(tempfile.mkdtemp(prefix="wmstudio-export-")) / folder.name
    zip_path = shutil.make_archive(str(archive), "zip", root_dir=folder.parent, base_dir=folder.name)
    return zip_path, f"📦 Exported **{name}** to `{folder}` (parquet + JSONL + card); the zip is ready to download."


def push_curriculum(store: Store, curriculum_id: Any, repo_id: str, token: str | None, private: bool) -> str:
    """Export the curriculum and push it to a Hugging Face dataset repo (token from the box or HF_TOKEN)."""
    if curriculum_id in (None, ""):
        raise InvalidInput(Problem("curriculum", "choose a curriculum version to push"))
    token = (token or "").strip() or os.environ.get("HF_TOKEN", "")
    if not token:
        raise InvalidInput(Problem("token", "no Hugging Face token: paste a write token or set HF_TOKEN"))
    folder, name = _export_folder(store, int(curriculum_id))
    try:
        url = push_to_hub(folder, (repo_id or "").strip(), token, private=bool(private))
    except PushFailed as err:
        raise PushFailed(str(err).replace(token, "***")) from None  # the token never reaches the page or a log
    return f"🚀 Pushed **{name}** to {url}"


def _export_folder(store: Store, curriculum_id: int) -> tuple[Path, str]:
    curriculum = next((s.curriculum for s in list_curricula(store) if s.curriculum.id == curriculum_id), None)
    if curriculum is None:
        raise InvalidInput(Problem("curriculum", f"no curriculum with id {curriculum_id}: pick one in the list"))
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", curriculum.name).strip("-.") or "curriculum"
    folder = user_home() / "exports" / f"{slug}-v{curriculum.version}"
    name = f"{curriculum.name} v{curriculum.version}"
    export_dataset(export_rollouts(store, curriculum_id), folder, name)
    return folder, name


def import_dataset_file(store: Store, upload: str | None) -> str:
    """Import an exported dataset (the zip, its parquet or its JSONL) as new rollouts; worlds are saved as versions."""
    if not upload:
        raise InvalidInput(Problem("file", "choose an exported dataset: the .zip, or its .parquet / .jsonl file"))
    path = Path(upload)
    with tempfile.TemporaryDirectory(prefix="wmstudio-import-") as scratch:
        source = _unzip_dataset(path, Path(scratch)) if path.suffix.lower() == ".zip" else path
        rollouts = import_dataset(source)
        steps = [[(s, MadeBy.from_json(s.made_by, f"rollouts[{i}].steps[{j}].made_by")) for j, s in enumerate(r.steps)]
                 for i, r in enumerate(rollouts)]
    created = []
    for rollout, made in zip(rollouts, steps, strict=True):
        world = save_world_version(store, rollout.world)
        status = rollout.status if rollout.status in ROLLOUT_STATUSES else "pending"
        row = create_rollout(store, world.id, rollout.title, rollout.tags, status)
        for step, made_by in made:
            append_step(store, row.id, step.call, step.response, made_by, step.check_report)
        created.append(row.id)
    ids = ", ".join(map(str, created[:20])) + (" …" if len(created) > 20 else "")
    return f"📥 Imported {len(created)} rollout(s) with {sum(map(len, steps))} steps as new rollouts: {ids or 'none'}."


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
