"""Another project's world-model chat rows (the Patronus format) and agent trajectories (OpenAI messages,
tau-bench records) imported as rollouts, to curate and rate.

Each row's user turn `State: ...\\n\\nAction: ...` (the paper's message-list layout, or ours: what `wmstudio
corpus`, `wmstudio prompt --format chat|patronus` and the dataset export write) gives the earlier steps and the
call, its assistant turn the response: one rollout per row, every step marked as imported from `file:line`. The
rows name no world, so unless one is given they go into a world named after the file whose tools are the ones the
calls name (open schemas). A trajectory file gives one rollout per trajectory in it. Every row is read (within the
input limits) and checked before anything is written: one bad row imports nothing. A file holding one JSON row
(or a list of rows) is read as well as JSON Lines."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import MadeBy, NewRollout, NewStep, Store, import_rollouts
from wmstudio.studio.curricula import ImportResult
from wmstudio.world.checks.report import check_step
from wmstudio.world.history import HistoryStep, response_text
from wmstudio.world.input_limits import InputRefused, loads_limited
from wmstudio.world.prompt.row_turns import read_row
from wmstudio.world.spec import WorldSpec
from wmstudio.world.tools import Tool
from wmstudio.world.trajectories import STATE_PREFIX, read_trajectories_file

MAX_CHAT_FILE_BYTES = 500_000_000
MAX_ROW_CHARS = 4_000_000  # of one row (a line): a world-model row is a prompt and an answer, rarely over 100,000
SNIFF_BYTES = 200_000  # how much of a file is read to tell chat rows from an exported dataset


def looks_like_chat_rows(path: Path) -> bool:
    """Whether `path` is a JSON Lines file of world-model chat rows (a user turn starting "State: ")."""
    if not path.is_file() or path.suffix.lower() not in (".jsonl", ".json"):
        return False
    with path.open("rb") as handle:
        first = handle.readline(SNIFF_BYTES).decode("utf-8", "replace")
    try:
        row = loads_limited(first)
    except (json.JSONDecodeError, InputRefused):
        return False
    messages = row.get("messages") if isinstance(row, dict) else None
    return isinstance(messages, list) and any(
        isinstance(m, dict) and m.get("role") == "user" and str(m.get("content", "")).startswith(STATE_PREFIX)
        for m in messages)


def import_chat_rows(store: Store, path: Path, world: WorldSpec | None = None) -> ImportResult:
    """Import every row of the JSON Lines file `path` as a new pending rollout in `world` (or one made from the
    calls); InvalidInput names each bad row by file and line, and nothing is written then."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"{path}: no such file")
    if path.stat().st_size > MAX_CHAT_FILE_BYTES:
        raise InvalidInput(f"{path}: over {MAX_CHAT_FILE_BYTES:,} bytes: split the file")
    rows: list[tuple[str, list[HistoryStep]]] = []
    problems: list[Problem] = []
    for where, row in _records(path, problems):
        try:
            steps = row_steps(row, where)
        except InvalidInput as err:
            problems.extend(err.problems)
            continue
        rows.append((where, steps))
    if problems:
        raise InvalidInput(problems[:20], source=str(path))
    if not rows:
        raise InvalidInput(f"{path}: holds no rows")
    return _import(store, path, world, rows)


def row_steps(row: Any, where: str) -> list[HistoryStep]:
    """The steps of one chat row: its history, then its call with the assistant turn's response."""
    messages = row.get("messages") if isinstance(row, dict) else None
    if isinstance(messages, str):  # some datasets keep the message list as JSON text
        try:
            messages = loads_limited(messages)
        except (json.JSONDecodeError, InputRefused) as err:
            raise InvalidInput(Problem(f"{where}.messages", f"is text that is not a JSON message list ({err})")) \
                from None
    if not isinstance(messages, list):
        raise InvalidInput(Problem(where, 'holds no "messages" list: not a world-model chat row'))
    read = read_row(messages, f"{where}.messages")
    if read is None:
        raise InvalidInput(Problem(f"{where}.messages", 'no user turn starting "State: ": not a world-model row'))
    if read.turns is None:
        raise InvalidInput(Problem(f"{where}.messages", "its Action is no tool call: only tool-calling rows are "
                                                        "steps"))
    if read.response is None:
        raise InvalidInput(Problem(f"{where}.messages", "ends without an assistant turn: the response is missing (a "
                                                        "prompt, as `wmstudio prompt` writes it, has none to import)"))
    return [*read.turns.history, HistoryStep(read.turns.call, read.response)]


def world_from_calls(name: str, steps: list[HistoryStep]) -> WorldSpec:
    """A world for rows that name none: the tools their calls use, with open parameter schemas."""
    names = list(dict.fromkeys(step.call.name for step in steps))
    tools = [Tool(name=tool, description="(imported: known only from the calls made to it)",
                  parameters={"type": "object"}) for tool in names]
    return WorldSpec(name=f"imported-{name}", tools=tools,
                     description=f"Tools seen in the imported rows of {name}; give their schemas to check responses.")


def import_trajectories(store: Store, path: Path, world: WorldSpec | None = None) -> ImportResult:
    """Import each trajectory of a history file (OpenAI messages, tau-bench records, our steps) as a new pending
    rollout in `world` (or one made from the calls); every row checked first, once per file and world."""
    path = Path(path)
    histories = read_trajectories_file(path)
    if not any(histories):
        raise InvalidInput(f"{path}: holds no tool calls: nothing to import")
    named = [(f"{path.name} trajectory {index}" if len(histories) > 1 else path.name, history)
             for index, history in enumerate(histories)]
    return _import(store, path, world, named)


def _records(path: Path, problems: list[Problem]) -> list[tuple[str, Any]]:
    """(where, row) of each row: the whole file when it is one JSON row or a list of rows, else each line."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInput(f"{path}: not UTF-8 text (bad byte at offset {err.start}): save it as UTF-8") from None
    if text.lstrip().startswith(("{", "[")):
        try:
            whole = loads_limited(text)
        except (json.JSONDecodeError, InputRefused):
            whole = None
        if isinstance(whole, dict) and "messages" in whole:
            return [(path.name, whole)] if not _too_long(text, path.name, problems) else []
        if isinstance(whole, list) and whole and all(isinstance(row, dict) for row in whole):
            rows = [(f"{path.name}[{i}]", row) for i, row in enumerate(whole)]
            return [(where, row) for where, row in rows if not _too_long(json.dumps(row), where, problems)]
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        if _too_long(line, where, problems):
            continue
        try:
            records.append((where, loads_limited(line)))
        except InputRefused as err:
            problems.append(Problem(where, str(err)))
        except json.JSONDecodeError as err:
            problems.append(Problem(where, f"not JSON ({err.msg} at column {err.colno}): one row per line"))
    return records


def _import(store: Store, path: Path, world: WorldSpec | None, rollouts: list[tuple[str, list[HistoryStep]]]) \
        -> ImportResult:
    """Write each (title, steps) as a pending rollout, every step checked and marked imported from its title;
    in batches (store/imports.py), fingerprinted by the file and the world so a repeat adds nothing."""
    the_world = world or world_from_calls(path.stem, [step for _, steps in rollouts for step in steps])
    new = []
    for where, steps in rollouts:
        texts = [response_text(step.response) for step in steps]
        new.append(NewRollout(world=the_world, title=where, tags=["imported"], steps=[
            NewStep(step.call, text, MadeBy.imported_from(where),
                    check_step(the_world, step.call, text, history=steps[:i]).to_json())
            for i, (step, text) in enumerate(zip(steps, texts, strict=True))]))
    fingerprint = hashlib.sha256(path.read_bytes() + the_world.dumps().encode("utf-8")).hexdigest()
    done = import_rollouts(store, new, fingerprint)
    return ImportResult(done.rollout_ids, done.steps, done.repeated)


def _too_long(text: str, where: str, problems: list[Problem]) -> bool:
    """Whether one row's text is over MAX_ROW_CHARS (a Problem naming it is added then)."""
    if len(text) <= MAX_ROW_CHARS:
        return False
    problems.append(Problem(where, f"the row is {len(text):,} characters, over the {MAX_ROW_CHARS:,}-character limit "
                                   "for one row: split its history into several rows, or cut the state it shows"))
    return True
