"""Curricula as Hugging Face datasets: add rollouts to a curriculum version, export it as a dataset folder (and
zip) with its scenarios, push it to the hub, and import such a dataset back as new rollouts (and, when it has
scenarios, as a new version of its curriculum holding them).

Plain functions over the store; the Rollouts tab and `wmstudio curricula` call them alike."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from wmstudio.locations import user_home
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import (  # noqa: F401 - re-exported: the curricula's and their scenarios' door to the store
    ROLLOUT_STATUSES,
    Curriculum,
    CurriculumScenario,
    MadeBy,
    NewRollout,
    NewScenario,
    NewStep,
    Store,
    count_scenarios,
    create_curriculum_version,
    curriculum_rollouts,
    curriculum_snapshots,
    get_curriculum,
    get_scenario,
    get_world,
    import_rollouts,
    list_curricula,
    list_scenarios,
    rollout_steps,
    save_scenarios,
    update_scenario,
)
from wmstudio.store.curricula import MAX_NAME_CHARS
from wmstudio.store.scenarios import SUCCESS_EXAMPLE  # noqa: F401 - re-exported
from wmstudio.studio.dataset_zip import unzip_dataset
from wmstudio.studio.datasets import (
    CARD_FILE,
    JSONL_FILE,
    PARQUET_FILE,
    ExportRollout,
    ExportStep,
    PushFailed,
    export_dataset,
    import_dataset,
    push_to_hub,
)
from wmstudio.studio.scenario_file import SCENARIOS_FILE, read_scenarios_file, scenarios_text
from wmstudio.train.agent.curriculum_scenarios import (  # noqa: F401 - BUILT_IN, DEMO_CURRICULUM, curriculum_row re-exported
    BUILT_IN,
    DEMO_CURRICULUM,
    curriculum_row,
    scenario_from_row,
    scenario_rows,
)
from wmstudio.world.input_limits import InputRefused, yaml_limited
from wmstudio.world.spec import Call

HF_TOKEN_ENV = "HF_TOKEN"


@dataclass
class ImportResult:
    """What an import created (or, for content imported before, had created): rollout ids and their step count,
    and, for an export with scenarios, the curriculum version holding them (`retail v2`) and how many there are."""

    rollout_ids: list[int]
    steps: int
    repeated: bool = False
    curriculum: str | None = None
    scenarios: int = 0


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


def export_scenarios(store: Store, curriculum_id: int) -> list[NewScenario]:
    """A curriculum version's scenarios as saved (and edited) in the store, in the shape scenarios.jsonl holds."""
    return scenario_rows([scenario_from_row(row) for row in list_scenarios(store, curriculum_id)])


def curriculum_by_id(store: Store, curriculum_id: int) -> Curriculum:
    """The curriculum version with this id; InvalidInput when there is none."""
    curriculum = next((s.curriculum for s in list_curricula(store) if s.curriculum.id == curriculum_id), None)
    if curriculum is None:
        raise InvalidInput(Problem("curriculum", f"no curriculum with id {curriculum_id}: pick one in the list"))
    return curriculum


def export_curriculum(store: Store, curriculum_id: int, folder: Path | None = None) -> tuple[Path, str]:
    """Write a curriculum version as a dataset folder (default: `exports/<name>-v<version>` in the user's folder),
    its scenarios in scenarios.jsonl when it has any; returns the folder and the version's label. The studio and
    `wmstudio curricula export` both write this."""
    curriculum = curriculum_by_id(store, curriculum_id)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", curriculum.name).strip("-.") or "curriculum"
    folder = Path(folder) if folder is not None else user_home() / "exports" / f"{slug}-v{curriculum.version}"
    name = f"{curriculum.name} v{curriculum.version}"
    scenarios = export_scenarios(store, curriculum_id)
    export_dataset(export_rollouts(store, curriculum_id), folder, name, scenarios=len(scenarios),
                   also_writes={SCENARIOS_FILE: scenarios_text(scenarios) if scenarios else None})
    return folder, name


def zip_folder(folder: Path) -> Path:
    """A zip of an exported folder in a fresh temporary folder (what the studio offers for download)."""
    archive = Path(tempfile.mkdtemp(prefix="wmstudio-export-")) / folder.name
    return Path(shutil.make_archive(str(archive), "zip", root_dir=folder.parent, base_dir=folder.name))


def push_token(typed: str | None, signed_in: str | None = None, single_user: bool = False) -> str:
    """The token a push uses: the one typed in, else the signed-in Hugging Face user's (on a Space), else this
    server's HF_TOKEN, but only for a local single-user studio: a shared studio never lends its token to a visitor."""
    for token in (typed, signed_in):
        if isinstance(token, str) and token.strip():
            return token.strip()
    server_token = os.environ.get(HF_TOKEN_ENV, "").strip()
    if single_user and server_token:
        return server_token
    if single_user:
        raise InvalidInput(Problem("token", f"no Hugging Face token: paste a write token or set {HF_TOKEN_ENV}"))
    raise InvalidInput(Problem("token", "no Hugging Face token: paste a write token (or log in with Hugging Face on a "
                                        f"Space); a shared studio does not push with its server's {HF_TOKEN_ENV}"))


def push_curriculum(store: Store, curriculum_id: int, repo_id: str, token: str | None, private: bool,
                    signed_in: str | None = None, single_user: bool = False) -> str:
    """Export the curriculum and push it to a Hugging Face dataset repo with the token `push_token` picks; its URL."""
    token = push_token(token, signed_in, single_user)
    folder, _ = export_curriculum(store, curriculum_id)
    try:
        return push_to_hub(folder, (repo_id or "").strip(), token, private=bool(private))
    except PushFailed as err:
        raise PushFailed(str(err).replace(token, "***")) from None  # the token never reaches the page or a log


def import_dataset_file(store: Store, path: Path) -> ImportResult:
    """Import an exported dataset (its folder, the zip, its parquet or its JSONL) as new rollouts; worlds are
    saved as versions. Every row is checked before anything is written, then written in short batches (the studio
    keeps saving meanwhile); an import cut short is finished by importing the same rows again, and rows imported
    before (the same rows file, also from another zip of the same folder) return the rollouts their first import
    made (`repeated`) instead of copies. A zip is checked while it unpacks (studio/dataset_zip.py).

    A folder or zip with scenarios.jsonl also becomes the next version of its curriculum (named in its card), holding
    the rollouts and those scenarios; a bad scenario line is refused, with its number, before anything is imported.
    Rows that hold what a rollout of that curriculum's latest version holds now (its world, title, calls and
    responses: an export of it, its scenarios edited) are that rollout, never a copy; a changed scenario file makes
    the next version."""
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="wmstudio-import-") as scratch:
        source = unzip_dataset(path, Path(scratch)) if path.suffix.lower() == ".zip" else path
        rollouts = import_dataset(source)
        fingerprint = rows_fingerprint(source)
        scenarios = read_scenarios_file(source) if source.is_dir() else []
        name = exported_curriculum_name(source) if scenarios else None
    new = [NewRollout(world=r.world, title=r.title, tags=list(r.tags),
                      status=r.status if r.status in ROLLOUT_STATUSES else "pending",
                      steps=[NewStep(s.call, s.response, MadeBy.from_json(s.made_by, f"rollouts[{i}].steps[{j}]"
                                                                                     ".made_by"), s.check_report)
                             for j, s in enumerate(r.steps)])
           for i, r in enumerate(rollouts)]
    known = _known_rollouts(store, name, rollouts) if name else {}
    fresh = [i for i in range(len(new)) if i not in known]
    if len(fresh) < len(new):  # only the rows no rollout holds yet are written: their own fingerprint
        fingerprint = hashlib.sha256(f"{fingerprint}:{fresh}".encode()).hexdigest()
    done = import_rollouts(store, [new[i] for i in fresh], fingerprint) if fresh else None
    made = dict(zip(fresh, done.rollout_ids)) if done else {}
    rollout_ids = [known[i] if i in known else made[i] for i in range(len(new))]
    steps = sum(len(r.steps) for r in new)
    repeated = done is None or done.repeated
    if not scenarios:
        return ImportResult(rollout_ids, steps, repeated)
    curriculum = _curriculum_of_import(store, name, rollout_ids, scenarios, path.name)
    return ImportResult(rollout_ids, steps, repeated, f"{curriculum.name} v{curriculum.version}", len(scenarios))


def _known_rollouts(store: Store, name: str, rollouts: Sequence[ExportRollout]) -> dict[int, int]:
    """Which imported rows (by index) hold what a rollout of the latest version of curriculum `name` holds now: the
    same world, title, calls and responses. Each rollout answers for one row at most."""
    try:
        latest = get_curriculum(store, name)
    except InvalidInput:
        return {}
    owners: dict[str, list[int]] = {}
    for rollout in curriculum_rollouts(store, latest.id):
        steps = [(step.call, step.response) for step in rollout_steps(store, rollout.id)]
        owners.setdefault(_content_key(get_world(store, rollout.world_id).spec().to_json(), rollout.title, steps),
                          []).append(rollout.id)
    known = {}
    for index, row in enumerate(rollouts):
        key = _content_key(row.world.to_json(), row.title, [(s.call.to_json(), s.response) for s in row.steps])
        if owners.get(key):
            known[index] = owners[key].pop(0)
    return known


def _content_key(world: dict, title: str, steps: list[tuple[dict, str]]) -> str:
    """What a rollout holds, as one comparable text."""
    return json.dumps([world, title, steps], sort_keys=True, ensure_ascii=False)


def exported_curriculum_name(folder: Path) -> str:
    """The curriculum an export was made from: its card's `pretty_name` without the version (`retail v3` ->
    `retail`), else the folder's name without it (`retail-v3` -> `retail`)."""
    try:
        card = (folder / CARD_FILE).read_text(encoding="utf-8")
        front = yaml_limited(card.split("---", 2)[1]) if card.startswith("---") else None
        name = front.get("pretty_name") if isinstance(front, dict) else None
    except (OSError, UnicodeDecodeError, IndexError, yaml.YAMLError, InputRefused):
        name = None
    name = name if isinstance(name, str) and name.strip() else folder.name
    return re.sub(r"[\s-]+v\d+$", "", name.strip())[:MAX_NAME_CHARS].strip() or "imported"


def _curriculum_of_import(store: Store, name: str, rollout_ids: list[int], scenarios: list[NewScenario],
                          source: str) -> Curriculum:
    """The next version of `name` holding the imported rollouts and scenarios; when its latest version already
    holds exactly these rollouts and these scenarios (the same export imported again), that version (given the
    scenarios if it has none)."""
    try:
        latest = get_curriculum(store, name)
    except InvalidInput:
        latest = None
    if latest is not None and [r.id for r in curriculum_rollouts(store, latest.id)] == rollout_ids:
        if not count_scenarios(store, latest.id):
            save_scenarios(store, latest.id, scenarios)
            return latest
        if [s.to_json() for s in export_scenarios(store, latest.id)] == [s.to_json() for s in scenarios]:
            return latest
    return create_curriculum_version(store, name, rollout_ids, f"imported from {source}", accepted_only=False,
                                     scenarios=scenarios)


def rows_fingerprint(source: Path) -> str:
    """SHA-256 of the rows file a dataset import reads: the file given, or the folder's parquet (else its JSONL)."""
    candidates = [source] if source.is_file() else [source / PARQUET_FILE, source / JSONL_FILE]
    rows = next((c for c in candidates if c.is_file()), None)
    if rows is None:
        raise InvalidInput(f"{source}: neither {PARQUET_FILE} nor {JSONL_FILE} found: not an exported dataset")
    digest = hashlib.sha256()
    try:
        with rows.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as err:
        raise InvalidInput(f"{rows}: cannot be read ({err.strerror or err})") from None
    return digest.hexdigest()
