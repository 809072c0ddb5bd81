"""Stress episodes for the corpus: the history and call each stress preset (presets.py) describes, in any
simulated world, with the simulator's ground truth.

adjacent-info: an answer that sits in a neighbouring record; insufficient-info: a call about something the state
lacks; long-output: a listing of 50+ records (in a synthetic world; as long as the state allows elsewhere);
impossible: a tool no one has, or an argument the tool lacks; pagination: the next page after earlier pages of the
same search; error-cascade: an injected error at step k (on a call that only reads, so replaying the history gives
the same state), later steps answered, and an independent call answered ok.
A preset that a world cannot stage (no paginated tool) falls back to the world's ordinary episode."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.sims.base import Simulator
from wmstudio.world.tools.arguments import argument_error
from wmstudio.world.spec import Call
from wmstudio.world.steering.presets import CASCADE_ERROR, stress_preset

TRIES = 40
HISTORY_STEPS = 2
IMPOSSIBLE_VERBS = ("teleport", "undelete", "clone", "forecast", "merge", "translate", "backdate", "refund_all")
IMPOSSIBLE_ARGUMENTS = ("force", "override_rules", "undo_last", "priority_boost", "as_admin")
SESSION_WORDS = ("session", "access", "auth")
NOT_FOUND = re.compile(r"NOT_FOUND|UNKNOWN|NO_SUCH|MISSING|ENOENT|TOKEN|CURSOR")  # codes saying what is not there
PAGE_NUMBER = re.compile(r"^page$|page_?num|^offset$", re.I)  # a page number conflicts with a page token


@dataclass
class Episode:
    """What a corpus row holds before its response: the initial state, the state now, the earlier steps, the target
    call, the directives the world carries (and the simulator obeys), and whether the call is a mistake."""

    initial: Any
    state: Any
    history: list[HistoryStep] = field(default_factory=list)
    call: Call | None = None
    directives: list[str] = field(default_factory=list)
    invalid: bool = False


def stress_episode(simulator: Simulator, rng: random.Random, preset: str) -> Episode:
    """The episode preset `preset` describes in `simulator`'s world (an ordinary one when the world cannot stage
    it)."""
    chosen = stress_preset(preset)
    directives = [d for d in chosen.directives if not (chosen.name == "error-cascade" and d.startswith("inject_error"))]
    stage = {"adjacent-info": _adjacent, "insufficient-info": _insufficient, "long-output": _long,
             "impossible": _impossible, "pagination": _pagination, "error-cascade": _cascade}[chosen.name]
    episode = stage(simulator, rng, directives)
    if episode.call is None:  # the world cannot stage it: an ordinary valid call after a short history
        episode = _start(simulator, rng, simulator.initial_state(rng))
        episode.call = simulator.agent_call(episode.state, rng)
    episode.directives = directives
    return episode


def _start(simulator: Simulator, rng: random.Random, initial: Any, steps: int | None = None) -> Episode:
    """An episode after `steps` (default 0-2) valid scripted steps."""
    episode = Episode(initial, initial)
    for _ in range(rng.randint(0, HISTORY_STEPS) if steps is None else steps):
        _advance(simulator, episode, simulator.agent_call(episode.state, rng))
    return episode


def _advance(simulator: Simulator, episode: Episode, call: Call, directives: list[str] | tuple = ()) -> dict:
    episode.state, response = simulator.step(episode.state, call, directives)
    episode.history.append(HistoryStep(call=call, response=response))
    return response


def _synthetic(simulator: Simulator) -> Any:
    """The blueprint of a synthetic world's simulator, None for the demo worlds."""
    return getattr(simulator, "blueprint", None)


# --- the presets ---------------------------------------------------------------------------------------------


def _adjacent(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    episode = _start(simulator, rng, simulator.initial_state(rng))
    for _ in range(TRIES):
        call = simulator.agent_call(episode.state, rng)
        _, response = simulator.step(episode.state, call)
        if response.get("status") == "ok" and neighbour_answer(episode.state, call, response,
                                                                simulator._tools[call.name].response) is not None:
            episode.call = call
            return episode
    return episode


def neighbour_answer(state: Any, call: Call, response: Any, schema: Any = None) -> Any:
    """A value of `response` that one record of the state holds, other than the one the call names (its owner,
    parent, a sibling), or None; values of the response schema's enums (a status many records share) do not count."""
    asked = {v for v in _leaves(call.arguments) if isinstance(v, str)}
    closed = {v for values in _enums(schema) for v in values if isinstance(v, str)}
    records = list(_records(state))
    if not any(asked & values for values in records):
        return None
    for value in _leaves(response):
        if not isinstance(value, str) or len(value) < 3 or value in asked or value in closed:
            continue
        holders = [values for values in records if value in values]
        if len(holders) == 1 and not asked & holders[0]:
            return value
    return None


def _enums(schema: Any) -> Iterator[Any]:
    if isinstance(schema, dict):
        yield schema.get("enum", [])
        for value in schema.values():
            yield from _enums(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _enums(value)


def _insufficient(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    episode = _start(simulator, rng, simulator.initial_state(rng))
    text = json.dumps(episode.state)
    for _ in range(TRIES):
        call = simulator.invalid_call(episode.state, rng)
        tool = simulator._tools.get(call.name)
        if tool is None or argument_error(tool.parameters, call.arguments) is not None:
            continue
        missing = [v for k, v in call.arguments.items() if isinstance(v, str) and not is_session_key(k)
                   and v not in text]
        _, response = simulator.step(episode.state, call)
        if missing and response.get("status") == "error" and NOT_FOUND.search(str(response.get("error"))):
            episode.call, episode.invalid = call, True
            return episode
    return episode


def _long(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    bp = _synthetic(simulator)
    if bp is not None:
        initial = simulator.initial_state(rng, records=rng.randrange(50, 66))
        episode = signed_in_episode(simulator, initial)
        plan = next(t for t in bp.tools if t.family == "search")
        episode.call = Call(plan.name, _session_of(simulator, episode, plan.name))
        return episode
    return _first_listing(simulator, rng, _start(simulator, rng, simulator.initial_state(rng), 0))


def _impossible(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    episode = _start(simulator, rng, simulator.initial_state(rng))
    call = simulator.agent_call(episode.state, rng)
    if rng.random() < 0.5:
        names = [t for t in simulator._tools]
        words = re.findall(r"[A-Z]?[a-z]+", rng.choice(names))
        noun = words[-1].lower() if words else "item"
        verb = rng.choice(IMPOSSIBLE_VERBS)
        name = f"{verb}_{noun}" if "_" in "".join(names) else verb.split("_")[0] + noun.capitalize()
        episode.call = Call(name, dict(call.arguments))
    else:
        episode.call = Call(call.name, {**call.arguments, rng.choice(IMPOSSIBLE_ARGUMENTS): True})
    episode.invalid = True
    return episode


def _pagination(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    bp = _synthetic(simulator)
    for _ in range(8):
        initial = simulator.initial_state(rng, records=rng.randrange(8, 16)) if bp is not None \
            else simulator.initial_state(rng)
        episode = _first_listing(simulator, rng, signed_in_episode(simulator, initial), paged=True)
        if episode.call is None:
            return episode
        token, after = paging_keys(simulator._tools[episode.call.name])
        first = {k: v for k, v in episode.call.arguments.items() if k != token and not PAGE_NUMBER.search(k)
                 and (rng.random() < 0.5 or is_session_key(k))}
        call, pages = Call(episode.call.name, first), rng.randint(1, 3)
        for _ in range(pages):
            response = _advance(simulator, episode, call, directives)
            if not response.get(after):  # the last page came early: it is the page to predict
                episode.history.pop()
                episode.state = simulator.step(episode.state, call)[0]
                break
            call = Call(call.name, {**first, token: response[after]})
        if token in call.arguments:
            episode.call = call
            return episode
    return Episode(initial, initial)


def _cascade(simulator: Simulator, rng: random.Random, directives: list[str]) -> Episode:
    episode = _start(simulator, rng, simulator.initial_state(rng), rng.randint(0, 2))
    codes = getattr(simulator, "injected_errors", None) or (CASCADE_ERROR,)
    for attempt in range(TRIES):  # the failing call changes nothing even unfailed, so a replay of the history
        failing = simulator.agent_call(episode.state, rng, invalid=attempt >= TRIES // 2)  # (without its error)
        if simulator.step(episode.state, failing)[0] == episode.state:  # gives the same state
            break
    _advance(simulator, episode, failing, [f"inject_error: {rng.choice(codes)}"])
    for _ in range(rng.randint(0, 2)):
        _advance(simulator, episode, simulator.agent_call(episode.state, rng))
    for _ in range(TRIES):
        call = simulator.agent_call(episode.state, rng)
        if simulator.step(episode.state, call)[1].get("status") == "ok":
            episode.call = call
            return episode
    return episode


# --- helpers -------------------------------------------------------------------------------------------------


def paging_keys(tool: Any) -> tuple[str, str] | None:
    """(page-token parameter, next-token response field) of a paginated tool, or None."""
    params = (tool.parameters or {}).get("properties", {})
    fields = (tool.response or {}).get("properties", {})
    token = next((k for k in params if re.search("token|cursor", k, re.I) and not is_session_key(k)), None)
    after = next((k for k, s in fields.items() if re.search("next", k, re.I) and isinstance(s, dict)
                  and s.get("type") == "string"), None)
    return (token, after) if token and after else None


def _first_listing(simulator: Simulator, rng: random.Random, episode: Episode, paged: bool = False) -> Episode:
    """Draw the scripted agent's calls until one is a listing (paginated when `paged`); calls before it that are
    not listings go into the history (a login, say), at most three."""
    for _ in range(TRIES * 2):
        call = simulator.agent_call(episode.state, rng)
        tool = simulator._tools.get(call.name)
        listing = simulator.query_state(episode.state, call) is not None
        if listing and (not paged or paging_keys(tool) is not None):
            episode.call = call
            return episode
        if len(episode.history) < 3 and not listing and rng.random() < 0.3:
            _advance(simulator, episode, call)
    return episode


def signed_in_episode(simulator: Simulator, initial: Any) -> Episode:
    """An episode that has signed in first, in a synthetic world with sessions (otherwise none)."""
    episode = Episode(initial, initial)
    bp = _synthetic(simulator)
    if bp is not None and bp.login is not None:
        from wmstudio.world.synth.agent import login_call

        _advance(simulator, episode, login_call(bp, initial))
    return episode


def _session_of(simulator: Simulator, episode: Episode, tool: str) -> dict[str, Any]:
    bp = _synthetic(simulator)
    if bp is None or bp.login is None:
        return {}
    from wmstudio.world.synth.agent import live_token

    return {bp.login["session"]: live_token(bp, episode.state)}


def is_session_key(key: str) -> bool:
    """Whether an argument named `key` carries a session (a token the world handed out at sign-in)."""
    return any(word in key.lower() for word in SESSION_WORDS)


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    else:
        yield value


def _records(state: Any) -> Iterator[set]:
    """The leaf values of each record in a state (records: the objects in its top-level lists, or in its
    top-level id-keyed objects, with the key as a value)."""
    if not isinstance(state, dict):
        return
    for held in state.values():
        if isinstance(held, list):
            for item in held:
                if isinstance(item, dict):
                    yield set(v for v in _leaves(item) if isinstance(v, (str, int)))
        elif isinstance(held, dict) and held and all(isinstance(v, dict) for v in held.values()):
            for key, item in held.items():
                yield {key} | set(v for v in _leaves(item) if isinstance(v, (str, int)))
