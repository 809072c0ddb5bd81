"""Scripted agent policies, the yardsticks of off-policy evaluation before a trained policy exists.

`expert` logs in where the task needs a session (using the token the world answered with), makes the task's call
and answers from the world's reply (done, or could not); `signs_in_late` is the expert that tries the task's call
before signing in, reads the world's own refusal (UNAUTHENTICATED: nothing steered), signs in and calls again (an
ordinary episode whose error is fixed, part of the SFT data); `tries_twice` is the expert that, refused by the world
(an error, or a `partial` answer), tries the same call once more before it says it could not (in the SFT data only on
the world's own refusals, which a second try never gets past: no recovery is shown); `recovering` is the expert that
retries after a transient error or a partial answer and signs in again after an expired session (the adversarial
curriculum's yardstick); `retry_once` is the one-line reflex a trained agent must beat: after any answer that is not
ok, the same call once more (after an expired session, a new sign-in first);
`noisy` is the expert with, on a seeded share of scenarios, one argument swapped for another value the state holds
(a wrong id: the mistake that matters); `random` makes the simulators' scripted-agent calls (a plausible call,
sometimes a malformed one) and stops. Each is a function `(scenario, trajectory) -> call or answer`."""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.scenarios import COULD_NOT, SESSION_ARGUMENT, Scenario, Trajectory
from wmstudio.world.json_types import json_or
from wmstudio.world.records import json_leaves
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call

if TYPE_CHECKING:  # type aliases only: the environments module loads the model libraries
    from wmstudio.train.agent.environments import Action, Policy

DONE = "Done: {task}"
RETRIED = ("RATE_LIMITED",)  # errors a retry of the same call can get past
SIGN_IN_AGAIN = ("TOKEN_EXPIRED", "INVALID_TOKEN", "UNAUTHENTICATED")  # errors a new session gets past
MAX_TRIES = 3  # of the task's call, by the recovering expert


def expert(scenario: Scenario, trajectory: Trajectory) -> Action:
    """Log in if needed, make the task's call once, then answer from what the world said: done, or could not."""
    names = [step.call.name for step in trajectory.steps]
    if scenario.needs_login and "login" not in names:
        return Call("login", dict(scenario.world.initial_state["login"]))
    if scenario.target is not None and scenario.target.name not in names:
        return _with_session(scenario.target, trajectory)
    return answer(scenario, trajectory)


def signs_in_late(scenario: Scenario, trajectory: Trajectory) -> Action:
    """Where the task needs a session: the task's call first (no token yet), then login, then the call again with the
    session; elsewhere as `expert`."""
    if not scenario.needs_login or scenario.target is None:
        return expert(scenario, trajectory)
    names = [step.call.name for step in trajectory.steps]
    if scenario.target.name not in names:
        return _with_session(scenario.target, trajectory)
    if "login" not in names:
        return Call("login", dict(scenario.world.initial_state["login"]))
    if names.count(scenario.target.name) < 2:
        return _with_session(scenario.target, trajectory)
    return answer(scenario, trajectory)


def tries_twice(scenario: Scenario, trajectory: Trajectory) -> Action:
    """The expert, but a task call the world did not answer ok (an error, a partial result) is made once more
    before the answer."""
    names = [step.call.name for step in trajectory.steps]
    last = json_or(trajectory.steps[-1].response, None) if trajectory.steps else None
    if scenario.target is not None and names and names[-1] == scenario.target.name \
            and names.count(scenario.target.name) < 2 and isinstance(last, dict) and last.get("status") != "ok":
        return _with_session(scenario.target, trajectory)
    return expert(scenario, trajectory)


def recovering(scenario: Scenario, trajectory: Trajectory) -> Action:
    """The expert that recovers: after RATE_LIMITED or a `partial` answer it makes the task's call again, after an
    expired session it logs in again and then retries (the task's call three times at most); else as `expert`."""
    names = [step.call.name for step in trajectory.steps]
    if scenario.target is None or scenario.target.name not in names:
        return expert(scenario, trajectory)
    last = json_or(trajectory.steps[-1].response, None)
    if names.count(scenario.target.name) < MAX_TRIES and isinstance(last, dict):
        if names[-1] == scenario.target.name and last.get("error") in SIGN_IN_AGAIN and scenario.needs_login:
            return Call("login", dict(scenario.world.initial_state["login"]))
        if (names[-1] == "login" and last.get("status") == "ok") or last.get("status") == "partial" \
                or last.get("error") in RETRIED:
            return _with_session(scenario.target, trajectory)
    return answer(scenario, trajectory)


def retry_once(scenario: Scenario, trajectory: Trajectory) -> Action:
    """The expert with the reflex: a call answered other than ok is made once more (after TOKEN_EXPIRED and the like,
    a new sign-in first), whatever the error; then the answer from the world's last reply."""
    if trajectory.steps:
        names = [step.call.name for step in trajectory.steps]
        refused = _last_refused(trajectory)
        if refused is not None and names.count(refused.call.name) < 2:
            error = (json_or(refused.response, None) or {}).get("error")
            if refused is trajectory.steps[-1] and error in SIGN_IN_AGAIN and scenario.needs_login:
                return Call("login", dict(scenario.world.initial_state["login"]))
            return _with_session(refused.call, trajectory)
    return expert(scenario, trajectory)


def _last_refused(trajectory: Trajectory):
    """The last step, or the call before a sign-in that ends the trajectory, when it was answered other than ok."""
    steps = trajectory.steps
    step = steps[-2] if len(steps) >= 2 and steps[-1].call.name == "login" else steps[-1]
    answered = json_or(step.response, None)
    if step.call.name == "login" or not isinstance(answered, dict) or answered.get("status") == "ok":
        return None
    return step


def answer(scenario: Scenario, trajectory: Trajectory) -> str:
    """The final answer an agent gives: done when its last call was answered ok, else that it could not."""
    last = json_or(trajectory.steps[-1].response, None) if trajectory.steps else None
    if isinstance(last, dict) and last.get("status") == "ok":
        return DONE.format(task=scenario.task)
    return f"{COULD_NOT}: {scenario.task}"


def noisy(share: float = 0.5, seed: int = 0) -> Policy:
    """The expert, but on `share` of the scenarios (chosen by seed) one task argument holds another state value."""

    def act(scenario: Scenario, trajectory: Trajectory) -> Action:
        action = expert(scenario, trajectory)
        if not isinstance(action, Call) or scenario.target is None or action.name != scenario.target.name \
                or not _unlucky(scenario, share, seed):
            return action
        return _wrong_argument(scenario, action, random.Random(f"{seed}-{scenario.id}"))

    return act


def random_agent(seed: int = 0, calls: int = 2) -> Policy:
    """The simulator's scripted agent for `calls` calls (a third of them malformed), then an answer."""

    def act(scenario: Scenario, trajectory: Trajectory) -> Action:
        if len(trajectory.steps) >= calls or not scenario.world.simulator:
            return answer(scenario, trajectory)
        rng = random.Random(f"{seed}-{scenario.id}-{len(trajectory.steps)}")
        simulator = get_simulator(scenario.world.simulator)
        return simulator.agent_call(scenario.world.initial_state, rng, invalid=rng.random() < 1 / 3)

    return act


POLICIES: dict[str, Callable[[int], Policy]] = {"expert": lambda seed: expert, "recovering": lambda seed: recovering,
                                                "tries-twice": lambda seed: tries_twice,
                                                "retry-once": lambda seed: retry_once,
                                                "noisy": lambda seed: noisy(seed=seed),
                                                "random": lambda seed: random_agent(seed=seed)}


def scripted_policy(name: str, seed: int = 0) -> Policy:
    """A scripted policy by name; InvalidInput lists the names."""
    if name not in POLICIES:
        raise InvalidInput(Problem("policy", f"{name!r} is not a scripted policy: use {', '.join(POLICIES)}, or "
                                             "a trained policy's folder (wmstudio train-agent)"))
    return POLICIES[name](seed)


def _with_session(call: Call, trajectory: Trajectory) -> Call:
    """`call` with the session token the last login answered with (whatever the world said it was)."""
    if SESSION_ARGUMENT not in call.arguments:
        return call
    token = ""
    for step in trajectory.steps:
        parsed = json_or(step.response, None)
        if step.call.name == "login" and isinstance(parsed, dict) and isinstance(parsed.get(SESSION_ARGUMENT), str):
            token = parsed[SESSION_ARGUMENT]
    return Call(call.name, {**call.arguments, SESSION_ARGUMENT: token})


def _unlucky(scenario: Scenario, share: float, seed: int) -> bool:
    return zlib.crc32(f"{seed}-{scenario.id}".encode()) % 10_000 < share * 10_000


def _wrong_argument(scenario: Scenario, call: Call, rng: random.Random) -> Call:
    """`call` with one string argument replaced by another string of the initial state (or a typo of it)."""
    names = [name for name, value in call.arguments.items() if isinstance(value, str) and name != SESSION_ARGUMENT]
    if not names:
        names = [name for name in call.arguments if name != SESSION_ARGUMENT]
    if not names:
        return call
    name = rng.choice(names)
    value = call.arguments[name]
    others = sorted({leaf for leaf in json_leaves(scenario.world.initial_state)
                     if type(leaf) is type(value) and leaf != value and not isinstance(leaf, bool)}, key=str)
    wrong = rng.choice(others) if others else (value + "-X" if isinstance(value, str) else value)
    return Call(call.name, {**call.arguments, name: wrong})


