"""scenarios.jsonl: the scenarios of an exported curriculum, one JSON object per line (`NewScenario.to_json()`).

It lies beside the dataset's README.md and data/ folder. On import every line is checked as saving it would be,
so a bad line is refused with its line number before anything is imported."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import NewScenario
from wmstudio.store.scenarios import scenario_problems
from wmstudio.world.input_limits import InputRefused, loads_limited

SCENARIOS_FILE = "scenarios.jsonl"
MAX_SCENARIOS_BYTES = 500_000_000


def scenarios_text(scenarios: Sequence[NewScenario]) -> str:
    """scenarios.jsonl's text: one scenario per line (what `read_scenarios_file` reads back)."""
    return "".join(json.dumps(s.to_json(), ensure_ascii=False) + "\n" for s in scenarios)


def read_scenarios_file(folder: Path) -> list[NewScenario]:
    """The scenarios in `folder/scenarios.jsonl` ([] when there is none); InvalidInput naming the line and field of
    every problem (`line 3: success: CEL syntax error ...`), a repeated key included."""
    path = Path(folder) / SCENARIOS_FILE
    if not path.is_file():
        return []
    if path.stat().st_size > MAX_SCENARIOS_BYTES:
        raise InvalidInput(Problem(SCENARIOS_FILE, f"is over {MAX_SCENARIOS_BYTES:,} bytes: split the curriculum"))
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidInput(Problem(SCENARIOS_FILE, f"not UTF-8 text (bad byte at offset {err.start}): re-export "
                                                   "the curriculum")) from None
    scenarios, problems, seen = [], [], {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            scenario = NewScenario.from_json(loads_limited(line), source="")
        except InputRefused as err:
            problems.append(Problem(f"line {number}", str(err)))
            continue
        except json.JSONDecodeError as err:
            problems.append(Problem(f"line {number}", f"invalid JSON at column {err.colno} ({err.msg}): fix the line "
                                                      "or re-export"))
            continue
        except InvalidInput as err:
            problems += [_on_line(number, p) for p in err.problems]
            continue
        problems += [_on_line(number, p) for p in scenario_problems(scenario)]
        key = scenario.key if isinstance(scenario.key, str) else None
        if key in seen:
            problems.append(Problem(f"line {number}: key", f"{key!r} is also line {seen[key]}'s key: keys are "
                                                           "unique in a curriculum"))
        elif key is not None:
            seen[key] = number
        scenarios.append(scenario)
    if problems:
        raise InvalidInput(problems, str(path))
    return scenarios


def _on_line(number: int, problem: Problem) -> Problem:
    return Problem(f"line {number}: {problem.path}" if problem.path else f"line {number}", problem.message)
