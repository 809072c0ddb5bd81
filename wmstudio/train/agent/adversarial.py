"""The `adversarial` curriculum: tasks whose first try the world fails on purpose (steering on one call of the task's
tool), so that an agent succeeds only by recovering, beside ordinary tasks as controls.

Each family's scenarios are ids `<family>-<world>-<split>-<n>`:
- `transient`: the task's first call answers RATE_LIMITED and a retry succeeds. Trained in retail, airline and
  filesystem, held out in payments and records (held out by world).
- `expired`: the task's first call answers TOKEN_EXPIRED; signing in again and retrying succeeds, and success needs
  the task's call answered ok with a session other than the one that expired (a retry with the same token fails).
  Payments only (the one simulated world with sessions): held out by initial state.
- `partial`: the first bulk tag answers `partial` (some ids failed); tagging them again succeeds. Records only (the
  one simulated task whose continuation is the same call): held out by initial state.
- `refused`: the world itself refuses the task, from its state, with nothing steered (an order already delivered
  cannot be cancelled, a flight without the seats, a tag the records do not allow, a charge too small): the one
  right answer is to try once and say it could not be done; a second try of the same call fails the scenario, so the
  reflex of retrying any error is wrong here. The world's answer decides the reward: a world that answers ok (an
  echo) teaches "done". Trained in retail, airline and filesystem, held out in payments and records, where it is
  half the held-out set.
- `control`: feasible tasks with no steering, in every world, so a policy that only learns to retry is not rewarded
  for it where nothing failed.

Every scenario's task call is one the simulator accepts from its initial state, and the same steering fails its first
try in the world model and in the simulator that scores the episode (world/steering/occurrence.py). Success reads
the final answer too: the task's call answered ok, and an answer that does not say it could not be done."""

from __future__ import annotations

import json
from dataclasses import replace

from wmstudio.train.agent.scenarios import COULD_NOT, HELDOUT, TRAIN, Scenario, call_like, make_scenario
from wmstudio.world.spec import Call
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.steering.occurrence import SteeringKey

ADVERSARIAL_CURRICULUM = "adversarial"
CONTROL, REFUSED = "control", "refused"
SEED_BASE = 700_000  # apart from the demo curriculum's seeds, so no adversarial state is a demo state
ANSWERED = f"!trajectory.final_answer.startsWith({json.dumps(COULD_NOT)})"  # done, and not said to have failed
FAILURES: dict[str, list[Anchor]] = {  # what the first try of the task's call answers, per family
    "transient": [Anchor("status", "error"), Anchor("error", "RATE_LIMITED"),
                  Anchor("message", "Too many requests: retry after 30 seconds.")],
    "expired": [Anchor("status", "error"), Anchor("error", "TOKEN_EXPIRED"),
                Anchor("message", "The session has expired: log in again.")],
    "partial": [Anchor("status", "partial")],
    "refused": [],  # the world's own refusal: nothing steered
}
WORLDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # family -> (training worlds, held-out worlds)
    "transient": (("retail", "airline", "filesystem"), ("payments", "records")),
    "expired": (("payments",), ("payments",)),
    "partial": (("records",), ("records",)),
    CONTROL: (("retail", "airline", "filesystem", "payments", "records"),) * 2,
    REFUSED: (("retail", "airline", "filesystem"), ("payments", "records")),  # last: the others keep their seeds
}
COUNTS: dict[str, tuple[int, int]] = {  # family -> scenarios per world (training, held out)
    "transient": (8, 8), "expired": (8, 6), "partial": (8, 6), "refused": (8, 20), CONTROL: (4, 2),
}
FAMILIES = tuple(WORLDS)


def adversarial_scenarios(seed: int = 0) -> list[Scenario]:
    """The adversarial curriculum: per family, its training and held-out worlds' scenarios (COUNTS), each from its
    own seeded initial state with a feasible task call, steered so its first try fails as the family says."""
    scenarios = []
    for number, family in enumerate(FAMILIES):
        for split, worlds, count, offset in ((TRAIN, WORLDS[family][0], COUNTS[family][0], 0),
                                             (HELDOUT, WORLDS[family][1], COUNTS[family][1], 10_000)):
            for world in worlds:
                base = seed * 1_000_000 + SEED_BASE + number * 100_000 + offset
                scenarios += _family_scenarios(family, world, split, count, base)
    return scenarios


def scenario_family(scenario: Scenario) -> str:
    """The family a scenario's id names (`transient-retail-train-3` -> transient); empty for ids of other shapes
    (the demo curriculum's `retail-train-3`, a saved curriculum's own keys)."""
    parts = scenario.id.split("-")
    tail = f"-{scenario.world.name}-{scenario.split}-"
    if len(parts) >= 4 and tail in scenario.id and parts[-1].isdigit():
        family = scenario.id[:scenario.id.index(tail)]
        return family if family in FAMILIES else ""
    return ""


def new_session(tool: str) -> str:
    """CEL: a call of `tool` answered ok with a session token no refused call of `tool` was given (a new sign-in
    after the session expired, not the expired token tried again)."""
    name = json.dumps(tool)
    token = "arguments.session_token"
    return (f'trajectory.calls.exists(c, c.name == {name} && c.status == "ok" && has(c.{token}) && '
            f'!trajectory.calls.exists(d, d.name == {name} && d.status == "error" && has(d.{token}) && '
            f'd.{token} == c.{token}))')


def tried_once(target: Call) -> str:
    """CEL: exactly one call like `target` (its tool and task arguments) in the episode."""
    return f"size(trajectory.calls.filter(c, {call_like(target)})) == 1"


def _family_scenarios(family: str, world: str, split: str, count: int, base: int) -> list[Scenario]:
    """`count` scenarios of `family` in `world`: feasible tasks (a login first where the world needs one; only bulk
    tags for `partial`), seeded from `base` on."""
    made: list[Scenario] = []
    seed = base
    while len(made) < count:
        scenario = make_scenario(world, split, len(made), seed)
        seed += 1
        if scenario.feasible == (family == REFUSED) or (family == "partial" and scenario.target.name != "tag_records"):
            continue
        if family == "expired" and not scenario.needs_login:
            continue
        made.append(_steered(scenario, family, len(made)))
    return made


def _steered(scenario: Scenario, family: str, index: int) -> Scenario:
    """`scenario` as one of `family`: its id, its first task call's failure, and (for `expired`) success that needs
    the second sign-in."""
    key = f"{family}-{scenario.world.name}-{scenario.split}-{index}"
    success = f"{scenario.success} && {ANSWERED}"
    if family == CONTROL:
        return replace(scenario, id=key, success=success)
    if family == REFUSED:  # tried once: a second try of a call the world refused is the reflex this family punishes
        return replace(scenario, id=key, success=f"{scenario.success} && {tried_once(scenario.target)}")
    steering = {str(SteeringKey(scenario.target.name, 1)): list(FAILURES[family])}
    success = f"{success} && {new_session(scenario.target.name)}" if family == "expired" else success
    return replace(scenario, id=key, steering=steering, success=success)
