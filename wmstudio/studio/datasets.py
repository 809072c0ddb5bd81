"""Curricula as Hugging Face dataset folders: export rollouts to parquet + JSONL chat rows, import them back exactly.

One row per step in the chat format of the public world-model corpus (`{"dataset", "messages": [system, user,
assistant]}`), plus the columns that rebuild each rollout, so a curriculum leaves the studio and comes back intact.

Folder layout (`datasets.load_dataset(folder)` reads the parquet through the README's `configs`;
`load_dataset("json", data_files=folder/data/train.jsonl)` reads the same rows from JSON Lines; one folder
cannot declare both as configs, since `datasets` picks one file format per folder):

    README.md                          dataset card: YAML front matter (configs, tags) and a column table
    data/train-00000-of-00001.parquet  the rows
    data/train.jsonl                   the same rows, one JSON object per line
    scenarios.jsonl                    a curriculum's scenarios, when it has any (see scenario_file.py)

Columns: `dataset`, `messages` (derived, not read back), `world_name` (derived), `rollout_id`, `rollout_title`,
`rollout_status`, `rollout_tags`, `step_index`, `world` (the world file's JSON text), `call` (JSON text),
`response` (text), `check_report` (JSON text, `null` when none), `made_by` (JSON text)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from wmstudio.problems import InvalidInput, Problem, join_path
from wmstudio.settings import whole_in
from wmstudio.studio.scenario_file import SCENARIOS_FILE
from wmstudio.studio.written_files import (
    check_out_folder,
    digests_of,
    in_the_way,
    record_written,
    refuse_in_the_way,
    remove_written,
    written_before,
)
from wmstudio.world.history import HistoryStep
from wmstudio.world.input_limits import InputRefused, loads_limited
from wmstudio.world.prompt.render import render_chat
from wmstudio.world.spec import Call, WorldSpec, parse_world

PARQUET_FILE = "data/train-00000-of-00001.parquet"
JSONL_FILE = "data/train.jsonl"
CARD_FILE = "README.md"
CARD_SIGNATURE = "exported from World Model Studio (wmstudio)"
DATASET_EXPORT = "wmstudio dataset export"  # the name an export's folder records its files under
MAX_DATASET_BYTES = 2_000_000_000

MESSAGE = pa.struct([("role", pa.string()), ("content", pa.string())])
SCHEMA = pa.schema([
    ("dataset", pa.string()),
    ("messages", pa.list_(MESSAGE)),
    ("world_name", pa.string()),
    ("rollout_id", pa.string()),
    ("rollout_title", pa.string()),
    ("rollout_status", pa.string()),
    ("rollout_tags", pa.list_(pa.string())),
    ("step_index", pa.int64()),
    ("world", pa.string()),
    ("call", pa.string()),
    ("response", pa.string()),
    ("check_report", pa.string()),
    ("made_by", pa.string()),
])
REQUIRED_COLUMNS = tuple(name for name in SCHEMA.names if name not in ("dataset", "messages", "world_name"))

Progress = Callable[[int, int], None]


@dataclass
class ExportStep:
    """One step of a rollout as exported: the call, the response text, its check report and how it was made."""

    call: Call
    response: str
    check_report: dict[str, Any] | None = None  # CheckReport.to_json()
    made_by: dict[str, Any] = field(default_factory=dict)  # model, sampler settings, seed, anchors or a human edit

    def to_json(self) -> dict[str, Any]:
        return {"call": self.call.to_json(), "response": self.response, "check_report": self.check_report,
                "made_by": self.made_by}


@dataclass
class ExportRollout:
    """A rollout as exported: its world and ordered steps plus the id, title, status and tags the studio keeps."""

    id: str
    world: WorldSpec
    steps: list[ExportStep]
    title: str = ""
    status: str = ""
    tags: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "status": self.status, "tags": list(self.tags),
                "world": self.world.to_json(), "steps": [step.to_json() for step in self.steps]}


def export_dataset(
    rollouts: Sequence[ExportRollout],
    folder: str | Path,
    name: str,
    max_chars: int | None = None,
    progress: Progress | None = None,
    scenarios: int = 0,
    also_writes: Mapping[str, str | None] | None = None,
) -> Path:
    """Write `rollouts` as a dataset folder named `name` (README card, parquet and JSONL rows); returns the folder.

    `max_chars` bounds each prompt (history middle-truncated); `progress(done, total)` is called per rollout;
    `scenarios` is how many scenarios.jsonl beside them holds (the card says so); `also_writes` holds more files'
    text by name (scenarios.jsonl), None to remove an earlier export's one.
    InvalidInput names every bad rollout field (`rollouts[1].steps[0].response: ...`) before anything is written,
    and any file in the folder that an export did not write but would overwrite (a README of the user's)."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(Problem("name", "give the dataset a name (e.g. the curriculum's name)"))
    _check_rollouts(rollouts)
    out = Path(folder)
    check_out_folder(out, "folder")
    also_writes = dict(also_writes or {})
    planned = [CARD_FILE, PARQUET_FILE, JSONL_FILE, *also_writes]
    ours = written_before(out, DATASET_EXPORT) or _earlier_export(out)
    refuse_in_the_way(out, in_the_way(out, planned, ours), DATASET_EXPORT, "move it away, or export into a new "
                                                                          "folder")
    rows: list[dict[str, Any]] = []
    for done, rollout in enumerate(rollouts, start=1):
        rows.extend(_rollout_rows(rollout, name.strip(), max_chars))
        if progress is not None:
            progress(done, len(rollouts))
    (out / "data").mkdir(parents=True, exist_ok=True)
    _write_atomically(out / PARQUET_FILE, lambda tmp: pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), tmp))
    jsonl = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    _write_atomically(out / JSONL_FILE, lambda tmp: tmp.write_text(jsonl, encoding="utf-8"))
    card = dataset_card(name.strip(), rollouts=len(rollouts), rows=len(rows), scenarios=scenarios)
    _write_atomically(out / CARD_FILE, lambda tmp: tmp.write_text(card, encoding="utf-8"))
    for extra, text in also_writes.items():
        if text is None:
            remove_written(out, [extra] if extra in ours else [])
        else:
            _write_atomically(out / extra, lambda tmp, text=text: tmp.write_text(text, encoding="utf-8"))
    record_written(out, DATASET_EXPORT, digests_of(out, ours | set(planned)))
    return out


def _earlier_export(out: Path) -> set[str]:
    """The files of an export made before exports kept a record: recognised by the card it wrote."""
    try:
        card = (out / CARD_FILE).read_text(encoding="utf-8")[:4000]
    except (OSError, UnicodeDecodeError):
        return set()
    if CARD_SIGNATURE not in card or not card.startswith("---\n"):
        return set()
    return {CARD_FILE, PARQUET_FILE, JSONL_FILE, SCENARIOS_FILE}


def import_dataset(folder: str | Path) -> list[ExportRollout]:
    """Read a dataset folder written by `export_dataset` (or its parquet/JSONL file) back into rollouts.

    Reads the parquet when present, else the JSONL; `messages` are derived and not read back. InvalidInput
    names the file, row and column of every problem (missing columns, bad JSON, a gap in a rollout's steps)."""
    path = _data_file(Path(folder))
    rows = _read_parquet(path) if path.suffix == ".parquet" else _read_jsonl(path)
    return _rebuild_rollouts(rows, str(path))


class PushFailed(RuntimeError):
    """The hub refused or could not be reached; the message says which repo and what to check."""


def push_to_hub(folder: str | Path, repo_id: str, token: str, private: bool = False,
                commit_message: str = "Upload wmstudio curriculum") -> str:
    """Upload an exported folder to the Hugging Face dataset repo `repo_id` (created if missing); returns its URL.

    Bad folder, repo id or token is InvalidInput; a refused or failed upload is PushFailed with the hub's reason."""
    from huggingface_hub import HfApi

    out = Path(folder)
    problems = []
    if not (out / CARD_FILE).is_file() or not ((out / PARQUET_FILE).is_file() or (out / JSONL_FILE).is_file()):
        problems.append(Problem("folder", f"{out} is not an exported dataset (needs {CARD_FILE} and {PARQUET_FILE}): "
                                          "export the curriculum first"))
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2 or not all(part.strip() for part in parts):
        problems.append(Problem("repo_id", f"{repo_id!r} is not a repo id: write it as owner/name"))
    if not isinstance(token, str) or not token.strip():
        problems.append(Problem("token", "no Hugging Face token: give a write token (or set HF_TOKEN)"))
    if problems:
        raise InvalidInput(problems)
    api = HfApi(token=token.strip())
    try:
        api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(out), repo_id=repo_id, repo_type="dataset",
                                   commit_message=commit_message,
                                   allow_patterns=[CARD_FILE, "data/*", SCENARIOS_FILE])
    except Exception as err:  # noqa: BLE001 - network, auth and hub errors all reach the user as one message
        raise PushFailed(f"could not push {out} to {repo_id}: {err}. Check the token has write access "
                         "to that repo and that the hub can be reached") from err
    return getattr(commit, "commit_url", None) or f"https://huggingface.co/datasets/{repo_id}"


def dataset_card(name: str, rollouts: int, rows: int, scenarios: int = 0) -> str:
    """README.md of an exported folder: front matter whose `configs` point `load_dataset` at the data files."""
    front = {
        "pretty_name": name,
        "tags": ["world-model", "tool-use", "wmstudio"],
        "configs": [
            {"config_name": "default", "data_files": [{"split": "train", "path": PARQUET_FILE}]},
        ],
    }
    columns = "\n".join(f"| `{column}` | {meaning} |" for column, meaning in _COLUMN_MEANINGS.items())
    return (
        f"---\n{yaml.safe_dump(front, sort_keys=False)}---\n\n# {name}\n\n"
        f"A world-model curriculum {CARD_SIGNATURE}: {rollouts} rollouts, {rows} rows "
        "(one per step). `messages` is the chat row a world model trains on (system: the world's sections; "
        "user: `State: ...` and `Action: ...`; assistant: the tool's response). The other columns rebuild the "
        "rollouts exactly (`wmstudio.studio.datasets.import_dataset`).\n\n"
        "```python\nfrom datasets import load_dataset\n"
        "rows = load_dataset(\"path/to/this/folder\")[\"train\"]  # the parquet\n"
        f"same = load_dataset(\"json\", data_files=\"path/to/this/folder/{JSONL_FILE}\")[\"train\"]\n```\n\n"
        f"| column | meaning |\n|---|---|\n{columns}\n"
        + (f"\n`{SCENARIOS_FILE}` holds the curriculum's {scenarios} scenarios, one JSON object per line: `key`, "
           "`split` (train or heldout), `world` (with its own initial state), `task`, `success` (a CEL condition "
           "over `state` and `trajectory`), `target` (the call an expert makes), `feasible` and `steering` "
           "(anchors per tool, e.g. `status=\"error\"`).\n" if scenarios else "")
    )


_COLUMN_MEANINGS = {
    "dataset": "the dataset's name",
    "messages": "chat row [system, user, assistant] rendered from the world, earlier steps and the call",
    "world_name": "name of the world",
    "rollout_id": "the rollout this step belongs to",
    "rollout_title": "its title",
    "rollout_status": "its review status (accepted, rejected, pending)",
    "rollout_tags": "its tags",
    "step_index": "position of the step in the rollout, from 0",
    "world": "the world file (JSON text)",
    "call": "the agent's call {name, arguments} (JSON text)",
    "response": "the tool response as text",
    "check_report": "deterministic check report (JSON text, null when not checked)",
    "made_by": "how the response was made: model, sampler settings, seed, anchors, or a human edit (JSON text)",
}


def _rollout_rows(rollout: ExportRollout, name: str, max_chars: int | None) -> list[dict[str, Any]]:
    world_text = json.dumps(rollout.world.to_json(), ensure_ascii=False)
    rows, history = [], []
    for index, step in enumerate(rollout.steps):
        chat = render_chat(rollout.world, step.call, history, max_chars=max_chars, response=step.response)
        rows.append({
            "dataset": name,
            "messages": chat["messages"],
            "world_name": rollout.world.name,
            "rollout_id": rollout.id,
            "rollout_title": rollout.title,
            "rollout_status": rollout.status,
            "rollout_tags": list(rollout.tags),
            "step_index": index,
            "world": world_text,
            "call": json.dumps(step.call.to_json(), ensure_ascii=False),
            "response": step.response,
            "check_report": json.dumps(step.check_report, ensure_ascii=False),
            "made_by": json.dumps(step.made_by, ensure_ascii=False),
        })
        history.append(HistoryStep(call=step.call, response=step.response))
    return rows


def _check_rollouts(rollouts: Any) -> None:
    """Every problem that would make a rollout fail to export or to come back identical."""
    if isinstance(rollouts, (str, bytes)) or not isinstance(rollouts, Sequence):
        raise InvalidInput(Problem("rollouts", "expected a list of ExportRollout"))
    if not rollouts:  # an empty parquet is not loadable by `datasets`, and there is nothing to train on
        raise InvalidInput(Problem("rollouts", "nothing to export: add rollouts to the curriculum first"))
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for i, rollout in enumerate(rollouts):
        path = f"rollouts[{i}]"
        if not isinstance(rollout, ExportRollout):
            problems.append(Problem(path, f"expected an ExportRollout, got {type(rollout).__name__}"))
            continue
        if not isinstance(rollout.id, str) or not rollout.id:
            problems.append(Problem(f"{path}.id", "must be non-empty text (e.g. str of the store's id)"))
        elif rollout.id in seen:
            problems.append(Problem(f"{path}.id", f"{rollout.id!r} is also rollouts[{seen[rollout.id]}]'s id: "
                                                  "ids must be unique"))
        else:
            seen[rollout.id] = i
        if not isinstance(rollout.world, WorldSpec):
            problems.append(Problem(f"{path}.world", "must be a WorldSpec (load it with load_world/parse_world)"))
        for key in ("title", "status"):
            if not isinstance(getattr(rollout, key), str):
                problems.append(Problem(f"{path}.{key}", "must be text"))
        if not isinstance(rollout.tags, list) or not all(isinstance(tag, str) for tag in rollout.tags):
            problems.append(Problem(f"{path}.tags", "must be a list of text tags"))
        if not isinstance(rollout.steps, list) or not rollout.steps:
            problems.append(Problem(f"{path}.steps", "no steps: a rollout needs at least one step to be exported"))
            continue
        for j, step in enumerate(rollout.steps):
            problems.extend(_step_problems(step, f"{path}.steps[{j}]"))
    if problems:
        raise InvalidInput(problems)


def _step_problems(step: Any, path: str) -> list[Problem]:
    if not isinstance(step, ExportStep):
        return [Problem(path, f"expected an ExportStep, got {type(step).__name__}")]
    problems = []
    if not isinstance(step.call, Call):
        problems.append(Problem(f"{path}.call", 'must be a Call (Call.from_json({"name": ..., "arguments": {...}}))'))
    elif not _is_json(step.call.arguments):
        problems.append(Problem(f"{path}.call.arguments", "must hold JSON values only"))
    if not isinstance(step.response, str):
        problems.append(Problem(f"{path}.response", "must be the response text (json.dumps a JSON value first)"))
    if step.check_report is not None and not (isinstance(step.check_report, dict) and _is_json(step.check_report)):
        problems.append(Problem(f"{path}.check_report", "must be a JSON object (CheckReport.to_json()) or None"))
    if not isinstance(step.made_by, dict) or not _is_json(step.made_by):
        problems.append(Problem(f"{path}.made_by", "must be a JSON object (model, sampler settings, seed, ...)"))
    return problems


def _is_json(value: Any) -> bool:
    """True when `value` survives a JSON round trip unchanged (no tuples, NaN, non-text keys, objects)."""
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
    except (TypeError, ValueError):
        return False


def _write_atomically(target: Path, write: Callable[[Path], Any]) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    write(tmp)
    tmp.replace(target)


def _data_file(path: Path) -> Path:
    """The rows file of a dataset folder (parquet first), or `path` itself when it is a rows file."""
    if not path.exists():
        raise InvalidInput(f"{path}: no such folder or file: give the folder export_dataset wrote")
    if path.is_file():
        if path.suffix not in (".parquet", ".jsonl"):
            raise InvalidInput(f"{path}: not a .parquet or .jsonl file: give the exported folder or its data file")
        candidate = path
    else:
        candidates = [path / PARQUET_FILE, path / JSONL_FILE]
        candidate = next((c for c in candidates if c.is_file()), None)
        if candidate is None:
            raise InvalidInput(f"{path}: neither {PARQUET_FILE} nor {JSONL_FILE} found: this folder is not an "
                               "exported wmstudio dataset")
    size = candidate.stat().st_size
    if size > MAX_DATASET_BYTES:
        raise InvalidInput(f"{candidate}: {size:,} bytes, over the {MAX_DATASET_BYTES:,}-byte limit: split it")
    return candidate


def _read_parquet(path: Path) -> list[dict[str, Any]]:
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as err:
        raise InvalidInput(f"{path}: not a readable parquet file ({err}): re-export the dataset") from None
    missing = [column for column in REQUIRED_COLUMNS if column not in table.column_names]
    if missing:
        raise InvalidInput(f"{path}: missing column(s) {', '.join(missing)}: not a wmstudio export "
                           "(export with wmstudio.studio.datasets.export_dataset)")
    return table.select(list(REQUIRED_COLUMNS)).to_pylist()


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows = []
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{path}: not UTF-8 text (bad byte at offset {err.start}): re-export the dataset") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = loads_limited(line)
        except json.JSONDecodeError as err:
            raise InvalidInput(f"{path}:{number}:{err.colno}: invalid JSON ({err.msg}): fix or re-export") from None
        except InputRefused as err:
            raise InvalidInput(f"{path}:{number}: {err}") from None
        if not isinstance(row, dict):
            raise InvalidInput(f"{path}:{number}: a row must be a JSON object")
        missing = [column for column in REQUIRED_COLUMNS if column not in row]
        if missing:
            raise InvalidInput(f"{path}:{number}: missing column(s) {', '.join(missing)}: not a wmstudio export")
        rows.append(row)
    return rows


def _rebuild_rollouts(rows: list[dict[str, Any]], source: str) -> list[ExportRollout]:
    """Group rows by rollout (first-seen order), check each column, and put the steps back in order."""
    problems: list[Problem] = []
    grouped: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for i, row in enumerate(rows):
        before = len(problems)
        for column in ("rollout_id", "rollout_title", "rollout_status", "world", "call", "response",
                       "check_report", "made_by"):
            if not isinstance(row[column], str):
                problems.append(Problem(f"rows[{i}].{column}", "must be text"))
        tags = row["rollout_tags"]
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            problems.append(Problem(f"rows[{i}].rollout_tags", "must be a list of text tags"))
        if not whole_in(row["step_index"], 0):
            problems.append(Problem(f"rows[{i}].step_index", "must be a whole number from 0"))
        if len(problems) == before:
            grouped.setdefault(row["rollout_id"], []).append((i, row))
    rollouts = []
    for rollout_id, members in grouped.items():
        rollout = _rebuild_one(rollout_id, members, problems)
        if rollout is not None:
            rollouts.append(rollout)
    if problems:
        raise InvalidInput(problems, source)
    return rollouts


def _rebuild_one(rollout_id: str, members: list[tuple[int, dict[str, Any]]],
                 problems: list[Problem]) -> ExportRollout | None:
    first_index, first = members[0]
    for i, row in members[1:]:
        for column in ("world", "rollout_title", "rollout_status", "rollout_tags"):
            if row[column] != first[column]:
                problems.append(Problem(f"rows[{i}].{column}", f"differs from rows[{first_index}] of the same "
                                                               f"rollout {rollout_id!r}: a rollout has one value"))
    indices = sorted(row["step_index"] for _i, row in members)
    if indices != list(range(len(members))):
        problems.append(Problem(f"rows[{first_index}].step_index", f"rollout {rollout_id!r} has steps {indices}: "
                                f"expected 0..{len(members) - 1} with no gaps or repeats"))
        return None
    try:
        world_json = _json_column(first, "world", first_index)
    except InvalidInput as err:
        problems.extend(err.problems)
        return None
    try:
        world = parse_world(world_json, source=f"rows[{first_index}].world")
    except InvalidInput as err:
        problems.extend(Problem(join_path(f"rows[{first_index}].world", p.path) if p.path else
                                f"rows[{first_index}].world", p.message) for p in err.problems)
        return None
    steps: list[ExportStep | None] = [None] * len(members)
    for i, row in members:
        try:
            call = Call.from_json(_json_column(row, "call", i), source=f"rows[{i}].call")
            check_report = _json_column(row, "check_report", i)
            made_by = _json_column(row, "made_by", i)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        if check_report is not None and not isinstance(check_report, dict):
            problems.append(Problem(f"rows[{i}].check_report", "must be a JSON object or null"))
        if not isinstance(made_by, dict):
            problems.append(Problem(f"rows[{i}].made_by", "must be a JSON object"))
        steps[row["step_index"]] = ExportStep(call=call, response=row["response"], check_report=check_report,
                                              made_by=made_by)
    if any(step is None for step in steps):
        return None
    return ExportRollout(id=rollout_id, world=world, steps=steps, title=first["rollout_title"],
                         status=first["rollout_status"], tags=list(first["rollout_tags"]))


def _json_column(row: dict[str, Any], column: str, index: int) -> Any:
    try:
        return loads_limited(row[column])
    except json.JSONDecodeError as err:
        raise InvalidInput(Problem(f"rows[{index}].{column}", f"invalid JSON at column {err.colno} ({err.msg}): "
                                                              "fix or re-export")) from None
    except InputRefused as err:
        raise InvalidInput(Problem(f"rows[{index}].{column}", str(err))) from None
