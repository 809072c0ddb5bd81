"""Scenarios an agent is trained and evaluated on: a world, the agent's task, steering, and a success condition.

A success condition is CEL over the episode: `trajectory.calls` (each `{"name", "arguments", "response",
"status"}`, the response parsed when it is JSON) and `trajectory.final_answer`, beside `state` (the world's initial
state). The demo curriculum is drawn from the five simulated worlds: each scenario asks for one state-changing call
that the simulator accepts from the scenario's initial state (a refund, a booking, a move, a tag, a charge...), and
succeeds when the agent made that call with the task's arguments and the world answered it ok."""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.locations import REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.rules.cel import evaluate_check
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

TRAIN, HELDOUT = "train", "heldout"
SESSION_ARGUMENT = "session_token"
COULD_NOT = "Could not"  # how an answer reports a task the world refused
MALFORMED = "(not an action)"  # how an episode ends when the policy writes words that are not an action
INFEASIBLE_SHARE = 1 / 3  # scenarios whose task the world refuses (an undelivered order to refund, a full flight)  # a credential the agent gets by logging in, never part of what the task asks
ARGUMENT_ERRORS = ("INVALID_ARGUMENT", "MISSING_ARGUMENT", "UNKNOWN_TOOL")  # malformed calls, not the world's refusals
TASKS = {  # what a user would ask for, per target tool
    "refund_order": "The customer asks for a refund of {amount_cents} cents on order {order_id}.",
    "cancel_order": "The customer wants to cancel order {order_id}.",
    "book_flight": "Book flight {flight} in the {fare} fare for {passengers} passenger(s).",
    "cancel_booking": "Cancel booking {booking_id}.",
    "change_booking": "Move booking {booking_id} to flight {new_flight}.",
    "mkdir": "Create the folder {path}.",
    "mv": "Move {source} to {destination}.",
    "rm": "Delete {path}.",
    "tag_records": "Tag the accounts {ids} with \"{tag}\".",
    "create_charge": "Charge customer {customer_id} {amount_cents} cents in {currency}.",
    "refund_charge": "Refund charge {charge_id}.",
    "create_api_key": "Create an API key labelled \"{label}\".",
}


@dataclass
class Scenario:
    """One episode's setting: the world (with its initial state), the task, the anchors pinned per tool (steering
    the world model), the success condition, and the target call an expert makes, which the world accepts
    (`feasible`) or refuses (then success is trying it and reporting that it could not be done)."""

    id: str
    split: str
    world: WorldSpec
    task: str
    success: str = ""  # empty: no success condition (a curated rollout replayed as a scenario)
    target: Call | None = None
    feasible: bool = True
    steering: dict[str, list[Anchor]] = field(default_factory=dict)

    @property
    def needs_login(self) -> bool:
        return self.target is not None and SESSION_ARGUMENT in self.target.arguments


@dataclass
class Step:
    """One call of an episode and the world's answer to it."""

    call: Call
    response: str

    def to_json(self) -> dict[str, Any]:
        parsed = _parsed(self.response)
        status = parsed.get("status") if isinstance(parsed, dict) else None
        return {"name": self.call.name, "arguments": self.call.arguments, "response": parsed, "status": status}


@dataclass
class Trajectory:
    """An episode: the calls made and answered, and the agent's final answer."""

    steps: list[Step] = field(default_factory=list)
    final_answer: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"calls": [step.to_json() for step in self.steps], "final_answer": self.final_answer}


def succeeded(scenario: Scenario, trajectory: Trajectory) -> bool:
    """Whether the episode meets the scenario's success condition (a condition that cannot run counts as not met,
    and so does a scenario without one)."""
    if not scenario.success:
        return False
    ok, _ = evaluate_check(scenario.success, {"state": scenario.world.initial_state,
                                              "trajectory": trajectory.to_json()}, names=("state", "trajectory"))
    return ok


def success_condition(target: Call, feasible: bool = True) -> str:
    """CEL. Feasible: some call like `target` (each task argument equal) answered ok. Infeasible (the world refuses
    it): such a call answered with an error, none answered ok, and a final answer that says it could not be done."""
    like = call_like(target)
    if feasible:
        return f'trajectory.calls.exists(c, {like} && c.status == "ok")'
    return (f'trajectory.calls.exists(c, {like} && c.status == "error") && '
            f'!trajectory.calls.exists(c, {like} && c.status == "ok") && '
            f'trajectory.final_answer.startsWith({json.dumps(COULD_NOT)})')


def call_like(target: Call, name: str = "c") -> str:
    """CEL over a call `name`: the tool of `target` with each of its task arguments (a list: the same items)."""
    parts = [f"{name}.name == {json.dumps(target.name)}"]
    for argument, value in target.arguments.items():
        if argument != SESSION_ARGUMENT:
            parts.append(f"{name}.arguments.{argument} == {json.dumps(value)}" if not isinstance(value, list) else
                         f"size({name}.arguments.{argument}) == {len(value)} && "
                         f"{json.dumps(value)}.all(v, v in {name}.arguments.{argument})")
    return " && ".join(parts)


def demo_scenarios(per_world: int = 12, heldout_per_world: int = 6, seed: int = 0) -> list[Scenario]:
    """The demo curriculum: for each simulated world, `per_world` training and `heldout_per_world` held-out
    scenarios, each from its own seeded initial state (held-out states are never training states)."""
    scenarios = []
    for world_name in sorted(SIMULATORS):
        for split, count, offset in ((TRAIN, per_world, 0), (HELDOUT, heldout_per_world, 10_000)):
            for index in range(count):
                scenarios.append(make_scenario(world_name, split, index, seed * 100_000 + offset + index))
    return scenarios


def split_of(scenarios: list[Scenario], split: str) -> list[Scenario]:
    """The scenarios of one split, the worlds taking turns (so the first N cover every world); InvalidInput naming
    the splits when there is no such split."""
    if split not in (TRAIN, HELDOUT):
        raise InvalidInput(Problem("split", f"{split!r} is not a split: use {TRAIN} or {HELDOUT}"))
    chosen = [scenario for scenario in scenarios if scenario.split == split]
    return sorted(chosen, key=lambda s: (_turn(s.id), s.world.name))  # worlds take turns


def batch_problems(scenarios: list[Scenario], scenarios_per_step: int, curriculum: str = "the curriculum"
                   ) -> list[Problem]:
    """Why GRPO cannot train on `scenarios` with `scenarios_per_step` different training scenarios a step, each
    with the fix; empty when it can. With fewer training scenarios than a step plays, TRL builds no batch and a run
    would end after 0 steps."""
    train = len(split_of(scenarios, TRAIN))
    if not train:
        return [Problem("curriculum", f"{curriculum} has no training scenarios: give some the train split in the "
                                      "Train tab's Scenarios, or train on demo")]
    if train < scenarios_per_step:
        return [Problem("scenarios_per_step", f"{curriculum} has {train} training scenario(s) and a step plays "
                                              f"{scenarios_per_step} different ones, so no step could be built: set "
                                              f"Scenarios per step to {train} or fewer, or add training scenarios")]
    return []


def policy_words(folder: str | Path) -> set[str] | None:
    """The words a word-level policy in `folder` can write (read from its tokenizer.json, no model loaded); None for
    a policy that spells any name (a subword tokenizer: a chat model) or one not in a local folder."""
    path = Path(folder) / "tokenizer.json"
    if not path.is_file() and not Path(folder).is_absolute():  # the shipped policy is named from the repository
        path = REPO_ROOT / folder / "tokenizer.json"
    try:
        model = json.loads(path.read_text(encoding="utf-8")).get("model") or {}
    except (OSError, ValueError):
        return None
    vocab = model.get("vocab")
    return set(vocab) if model.get("type") == "WordLevel" and isinstance(vocab, dict) else None


def tool_problems(scenarios: list[Scenario], words: set[str] | None, curriculum: str = "the curriculum"
                  ) -> list[Problem]:
    """Why a policy that can write only `words` cannot act in the training scenarios' worlds: it names none of their
    tools, so every call it makes goes to a tool the world lacks. Empty when it names one, or spells any name."""
    tools = sorted({tool.name for scenario in split_of(scenarios, TRAIN) for tool in scenario.world.tools})
    if words is None or not tools or any(name in words for name in tools):
        return []
    shown = ", ".join(tools[:6]) + (f" and {len(tools) - 6} more" if len(tools) > 6 else "")
    return [Problem("policy", f"the policy's vocabulary names none of the tools of the worlds of {curriculum} ({shown}), "
                              "so each of its calls would go to a tool those worlds lack: train a policy on them "
                              "(`wmstudio train-agent`) or start from a chat model")]


def heldout_scored(scenarios: list[Scenario]) -> list[Scenario]:
    """The held-out scenarios a simulator can judge (a world with a simulator); the rest have no truth to score."""
    return [scenario for scenario in split_of(scenarios, HELDOUT) if scenario.world.simulator]


def _turn(scenario_id: str) -> int:
    """The number that ends a scenario's id (`retail-train-3` -> 3); 0 for an id that ends otherwise (an imported
    curriculum's own keys)."""
    tail = scenario_id.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def make_scenario(world_name: str, split: str, index: int, seed: int) -> Scenario:
    """A scenario whose target call the simulator accepts, or (a seeded third) refuses for a reason of the world's
    (after logging in, in a world that needs it)."""
    simulator = get_simulator(world_name)
    rng = random.Random(seed)
    state = simulator.initial_state(rng)
    ready = _logged_in(world_name, state)
    feasible = rng.random() >= INFEASIBLE_SHARE
    for attempt in range(2000):
        mistake = not feasible and attempt % 2 == 1  # a world-specific mistake: an unknown id, a forbidden call
        call = simulator.invalid_call(ready, rng) if mistake else simulator.valid_call(ready, rng)
        if call.name not in TASKS:
            continue
        after, response = simulator.step(ready, call)
        accepted = response.get("status") == "ok" and after != ready
        refused = response.get("status") == "error" and response.get("error") not in ARGUMENT_ERRORS
        if (accepted and feasible) or (refused and not feasible):
            return Scenario(f"{world_name}-{split}-{index}", split, simulator.world(state), task_text(call),
                            success_condition(call, feasible), call, feasible)
    raise RuntimeError(f"no {'accepted' if feasible else 'refused'} call found for {world_name} seed {seed}")


def task_text(target: Call) -> str:
    """The user's request for `target`: its template, then any argument the success condition pins that the
    template does not say (`Use parents=true.`)."""
    template = TASKS[target.name]
    said = {name for _, name, _, _ in string.Formatter().parse(template) if name}
    shown = {name: ", ".join(value) if isinstance(value, list) else value for name, value in target.arguments.items()}
    extra = [f"{name}={json.dumps(value)}" for name, value in target.arguments.items()
             if name not in said and name != SESSION_ARGUMENT]
    return template.format_map(_Blank(shown)) + (f" Use {', '.join(extra)}." if extra else "")


def _logged_in(world_name: str, state: dict[str, Any]) -> dict[str, Any]:
    """The state after the agent logs in with the credentials it shows (payments); other worlds as they are."""
    login = state.get("login") if isinstance(state, dict) else None
    if not isinstance(login, dict):
        return state
    after, _ = get_simulator(world_name).step(state, Call("login", dict(login)))
    return after


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return text
