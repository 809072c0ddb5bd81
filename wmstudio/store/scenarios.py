"""Scenarios of a curriculum version: saved all at once, listed in order, edited one by one (task, success, steering).

Every write is checked before anything changes (CEL syntax, the tools and anchors of steering against the scenario's
world), so bad input is refused naming the field and the fix, and what was saved stays as it was."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlmodel import delete, select

from wmstudio.problems import InvalidInput, Problem, join_path
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.tables import SCENARIO_SPLITS, Curriculum, CurriculumScenario, utcnow
from wmstudio.world.rules.cel import cel_syntax_problem, evaluate_check
from wmstudio.world.spec import Call, WorldSpec, parse_world
from wmstudio.world.steering.anchors import EXAMPLE as ANCHOR_EXAMPLE
from wmstudio.world.steering.anchors import anchor_problems, parse_anchor
from wmstudio.world.steering.occurrence import parse_steering_key

MAX_KEY_CHARS = 100
MAX_TASK_CHARS = 4000
SUCCESS_NAMES = ("state", "trajectory")  # what a success condition reads (world.rules.evaluate_check's `names`)
SUCCESS_EXAMPLE = 'trajectory.calls.exists(c, c.name == "refund_order" && c.status == "ok")'
STEERING_EXAMPLE = '{"refund_order#1": ["status=\\"error\\"", "error=\\"RATE_LIMITED\\""]}'
EMPTY_TRAJECTORY = {"calls": [], "final_answer": ""}


@dataclass
class NewScenario:
    """A scenario to save: key (unique in its curriculum version), split, world, task, success condition (CEL over
    `state` and `trajectory`), the expert's target call and whether the world accepts it, and steering as anchor
    text per tool or per call of a tool (`{"refund_order#1": ['status="error"']}`: its first call in an episode)."""

    key: str
    split: str
    world: WorldSpec
    task: str
    success: str
    target: Call | None = None
    feasible: bool = True
    steering: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """One line of an export's scenarios.jsonl."""
        return {"key": self.key, "split": self.split, "world": self.world.to_json(), "task": self.task,
                "success": self.success, "target": self.target.to_json() if self.target is not None else None,
                "feasible": self.feasible, "steering": {tool: list(texts) for tool, texts in self.steering.items()}}

    @classmethod
    def from_json(cls, data: Any, source: str = "scenario") -> NewScenario:
        """Read `to_json`'s shape back; InvalidInput names every missing or mistyped field (world and target are
        validated as world files and calls are)."""
        if not isinstance(data, dict):
            raise InvalidInput(Problem(source, "expected an object with key, split, world, task, success, target, "
                                               "feasible and steering"))
        problems = [Problem(join_path(source, name), "missing") for name in ("key", "split", "world", "task",
                                                                             "success") if name not in data]
        world, target = None, None
        if "world" in data:
            try:
                world = parse_world(data["world"])
            except InvalidInput as err:
                problems += [Problem(join_path(join_path(source, "world"), p.path) if p.path else
                                     join_path(source, "world"), p.message) for p in err.problems]
        if data.get("target") is not None:
            try:
                target = Call.from_json(data["target"], source=join_path(source, "target"))
            except InvalidInput as err:
                problems += err.problems
        if not isinstance(data.get("feasible", True), bool):
            problems.append(Problem(join_path(source, "feasible"), "must be true or false"))
        if problems:
            raise InvalidInput(problems)
        return cls(key=data["key"], split=data["split"], world=world, task=data["task"], success=data["success"],
                   target=target, feasible=data.get("feasible", True), steering=data.get("steering") or {})


# --- checks -------------------------------------------------------------------------------------------------------


def scenario_problems(scenario: NewScenario, path: str = "") -> list[Problem]:
    """Everything wrong with a scenario to save, each Problem naming its field (`scenarios[3].success`)."""
    problems = []
    key = scenario.key.strip() if isinstance(scenario.key, str) else ""
    if not key or len(key) > MAX_KEY_CHARS or re.search(r"\s", key):
        problems.append(Problem(join_path(path, "key"), f"give a key of 1 to {MAX_KEY_CHARS} characters without "
                                                        "spaces, e.g. retail-heldout-3"))
    if scenario.split not in SCENARIO_SPLITS:
        problems.append(Problem(join_path(path, "split"), f"{scenario.split!r} is not a split: use "
                                                          f"{' or '.join(SCENARIO_SPLITS)}"))
    if not isinstance(scenario.world, WorldSpec):
        return [*problems, Problem(join_path(path, "world"), "must be a WorldSpec (load it with parse_world)")]
    if not isinstance(scenario.feasible, bool):
        problems.append(Problem(join_path(path, "feasible"), "must be true or false"))
    if scenario.target is not None and not isinstance(scenario.target, Call):
        problems.append(Problem(join_path(path, "target"), "must be a Call or None"))
    task = task_problem(scenario.task, join_path(path, "task"))
    success = success_problem(scenario.success, scenario.world, join_path(path, "success"))
    _, steering = checked_steering(scenario.steering, scenario.world, join_path(path, "steering"))
    return problems + [p for p in (task, success) if p is not None] + steering


def task_problem(task: Any, path: str = "task") -> Problem | None:
    """None when `task` is a request the agent can be given, else why not."""
    if not isinstance(task, str) or not task.strip():
        return Problem(path, "empty: write what the user asks the agent for, e.g. \"Refund order A1.\"")
    if len(task) > MAX_TASK_CHARS:
        return Problem(path, f"is {len(task):,} characters: keep it under {MAX_TASK_CHARS:,}")
    return None


def success_problem(success: Any, world: WorldSpec, path: str = "success") -> Problem | None:
    """None when `success` is CEL that parses and, on an empty episode, reads only `state` and `trajectory` and
    gives true/false; else the Problem (the world rules' syntax checker, then a dry run from the initial state)."""
    if not isinstance(success, str) or not success.strip():
        return Problem(path, f"empty: write a CEL condition over state and trajectory, e.g. {SUCCESS_EXAMPLE}")
    syntax = cel_syntax_problem(success, path)
    if syntax is not None:
        return syntax
    _, why = evaluate_check(success, {"state": world.initial_state, "trajectory": EMPTY_TRAJECTORY},
                            names=SUCCESS_NAMES)
    unknown = re.search(r"`([^`]*)` is not known", why or "")
    if unknown:
        return Problem(path, f"`{unknown.group(1)}` is not known: a success condition reads `state` (the world's "
                             "initial state) and `trajectory` (`trajectory.calls`, each with name, arguments, "
                             f"response and status, and `trajectory.final_answer`), e.g. {SUCCESS_EXAMPLE}")
    if why and why.startswith("check returned"):
        return Problem(path, f"gives a {why.split()[2]}, not true/false: make it a condition, e.g. {SUCCESS_EXAMPLE}")
    return None


def checked_steering(steering: Any, world: WorldSpec, path: str = "steering") -> tuple[dict[str, list[str]],
                                                                                     list[Problem]]:
    """The steering in canonical anchor text (`status="error"`) per tool (`refund_order`: every call of it) or per
    call of a tool (`refund_order#2`: its second call in an episode), and its problems: a tool the world does not
    have, a bad call number, an anchor that does not parse, a field the tool's response schema rules out, a field
    pinned twice."""
    if not isinstance(steering, dict):
        return {}, [Problem(path, f"must map tool names to lists of anchors, e.g. {STEERING_EXAMPLE}")]
    tools = {tool.name: tool for tool in world.tools}
    known = ", ".join(tools) or "none"
    canonical, problems = {}, []
    for name, texts in steering.items():
        where = join_path(path, str(name))
        try:
            key = parse_steering_key(name, where)
        except InvalidInput as err:
            problems += err.problems
            continue
        if key.tool not in tools:
            problems.append(Problem(where, f"world {world.name!r} has no tool {key.tool!r}: steer one of its tools "
                                           f"({known})"))
            continue
        if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
            problems.append(Problem(where, f"must be a list of anchors as text, e.g. [{ANCHOR_EXAMPLE.split(',')[0]}]"))
            continue
        anchors, pinned = [], {}
        for i, text in enumerate(texts):
            try:
                anchor = parse_anchor(text)
            except InvalidInput as err:
                problems += [Problem(f"{where}[{i}]", str(p)) for p in err.problems]
                continue
            schema = [Problem(f"{where}[{i}]", str(p)) for p in anchor_problems([anchor], tools[key.tool].response)]
            if anchor.path in pinned:
                schema.append(Problem(f"{where}[{i}]", f"pins `{anchor.path}` again (also [{pinned[anchor.path]}]): "
                                                       "keep one value per field"))
            pinned.setdefault(anchor.path, i)
            problems += schema
            anchors.append(str(anchor))
        if anchors:
            canonical[str(key)] = anchors
    return canonical, problems


# --- reading and writing --------------------------------------------------------------------------------------


def save_scenarios(store: Store, curriculum_id: int, scenarios: Sequence[NewScenario],
                   replace: bool = False) -> list[CurriculumScenario]:
    """Save the scenarios of a curriculum version in this order, all or nothing; InvalidInput names each bad field
    (`scenarios[3].success`) before anything is written. A version that has scenarios keeps them unless `replace`."""
    check_scenarios(scenarios)
    with store.write() as session:
        curriculum = fetch_row(session, Curriculum, curriculum_id, "curriculum_id")
        mine = CurriculumScenario.curriculum_id == curriculum_id
        held = session.exec(select(CurriculumScenario.id).where(mine)).all()
        if held and not replace:
            raise InvalidInput(Problem("curriculum_id", f"{curriculum.name} v{curriculum.version} already has "
                                                        f"{len(held)} scenarios: edit them one at a time, or replace "
                                                        "them all (replace=True)"))
        session.exec(delete(CurriculumScenario).where(mine))
        return add_scenarios(session, curriculum_id, scenarios)


def check_scenarios(scenarios: Any) -> None:
    """InvalidInput naming every bad field of scenarios to save (`scenarios[3].success`) and every repeated key."""
    if isinstance(scenarios, (str, bytes)) or not isinstance(scenarios, Sequence) or not scenarios:
        raise InvalidInput(Problem("scenarios", "give at least one scenario"))
    problems, seen = [], {}
    for i, scenario in enumerate(scenarios):
        if not isinstance(scenario, NewScenario):
            problems.append(Problem(f"scenarios[{i}]", f"expected a NewScenario, got {type(scenario).__name__}"))
            continue
        problems += scenario_problems(scenario, f"scenarios[{i}]")
        key = scenario.key.strip() if isinstance(scenario.key, str) else None
        if key is not None and key in seen:
            problems.append(Problem(f"scenarios[{i}].key", f"{key!r} is also scenarios[{seen[key]}]'s key: keys are "
                                                           "unique in a curriculum version"))
        elif key is not None:
            seen[key] = i
    if problems:
        raise InvalidInput(problems)


def add_scenarios(session: Any, curriculum_id: int, scenarios: Sequence[NewScenario]) -> list[CurriculumScenario]:
    """Insert checked scenarios (check_scenarios) into a curriculum version inside the caller's write session."""
    rows = [CurriculumScenario(curriculum_id=curriculum_id, position=position, key=s.key.strip(), split=s.split,
                               world=s.world.dumps(), task=s.task.strip(), success=s.success.strip(),
                               target=s.target.to_json() if s.target is not None else None, feasible=s.feasible,
                               steering=checked_steering(s.steering, s.world)[0])
            for position, s in enumerate(scenarios)]
    session.add_all(rows)
    session.flush()
    return rows


def list_scenarios(store: Store, curriculum_id: int, split: str | None = None) -> list[CurriculumScenario]:
    """The scenarios of a curriculum version in order, of one split when `split` is given."""
    if split is not None and split not in SCENARIO_SPLITS:
        raise InvalidInput(Problem("split", f"{split!r} is not a split: use {' or '.join(SCENARIO_SPLITS)}"))
    query = select(CurriculumScenario).where(CurriculumScenario.curriculum_id == curriculum_id)
    query = query.where(CurriculumScenario.split == split) if split is not None else query
    with store.read() as session:
        fetch_row(session, Curriculum, curriculum_id, "curriculum_id")
        return list(session.exec(query.order_by(CurriculumScenario.position)))


def count_scenarios(store: Store, curriculum_id: int) -> int:
    """How many scenarios a curriculum version holds (0 for one that has none, or does not exist)."""
    with store.read() as session:
        return session.exec(select(sa.func.count()).where(CurriculumScenario.curriculum_id == curriculum_id)).one()


def get_scenario(store: Store, scenario_id: int) -> CurriculumScenario:
    """The scenario row with this id; InvalidInput when there is none."""
    with store.read() as session:
        return fetch_row(session, CurriculumScenario, scenario_id, "scenario_id")


def update_scenario(store: Store, scenario_id: int, *, task: str | None = None, success: str | None = None,
                    steering: dict[str, list[str]] | None = None) -> CurriculumScenario:
    """Change a scenario's task, success condition or steering (those given); InvalidInput naming each bad field
    and its fix, with nothing changed. Anchors are saved in canonical text (`status="error"`)."""
    row = get_scenario(store, scenario_id)
    world = row.spec()
    problems = []
    if task is not None and (problem := task_problem(task)) is not None:
        problems.append(problem)
    if success is not None and (problem := success_problem(success, world)) is not None:
        problems.append(problem)
    if steering is not None:
        steering, found = checked_steering(steering, world)
        problems += found
    if problems:
        raise InvalidInput(problems)
    with store.write() as session:
        row = fetch_row(session, CurriculumScenario, scenario_id, "scenario_id")
        row.task = task.strip() if task is not None else row.task
        row.success = success.strip() if success is not None else row.success
        row.steering = steering if steering is not None else row.steering
        row.updated_at = utcnow()
        session.add(row)
        session.flush()
        return row


def carry_scenarios(session: Any, from_curriculum_id: int, to_curriculum_id: int) -> None:
    """Copy one curriculum version's scenarios to another inside the caller's write session (a new version of a
    curriculum keeps the scenarios of the one before)."""
    for row in session.exec(select(CurriculumScenario).where(CurriculumScenario.curriculum_id == from_curriculum_id)):
        copied = row.model_dump(exclude={"id", "curriculum_id"})
        session.add(CurriculumScenario(curriculum_id=to_curriculum_id, **copied))
