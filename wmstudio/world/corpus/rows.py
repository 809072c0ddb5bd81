"""The world-model corpus: chat rows from the simulated worlds, with ground-truth responses and what re-checks them.

Scripted agents play episodes in every simulated world (valid calls, mistakes and policy violations, some
steered by directives); each row is one step in the public chat format, split 80/10/10, byte-identical per seed."""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.checks.refused_requests import unissued_token
from wmstudio.world.corpus.plan import SYNTHETIC_SHARE, corpus_plan, split_plan, split_themes, world_splits
from wmstudio.world.corpus.stress import stress_episode
from wmstudio.world.grounding import NONE, ORACLE, ORACLE_SHARE
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import render_chat
from wmstudio.world.records import json_leaves
from wmstudio.world.sims import Simulator
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import Directive
from wmstudio.world.steering.presets import stress_preset
from wmstudio.world.synth.registry import is_synthetic

SPLITS = ("train", "eval", "test")
SPLIT_SHARES = (0.8, 0.1, 0.1)
MAX_ROWS = 1_000_000
MAX_HISTORY = 6  # earlier steps the scripted agent plays; one more where the target pages on (with_issuing_page)
INVALID_SHARE = 0.2  # target calls that are mistakes (missing/wrong-typed arguments, unknown ids, policy)
HISTORY_INVALID_SHARE = 0.15
DIRECTIVE_SHARE = 0.25  # rows steered by directives
INJECTED_ERRORS = {
    "retail": ("PAYMENT_GATEWAY_ERROR", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE", "TIMEOUT"),
    "airline": ("INVENTORY_UNAVAILABLE", "FARE_EXPIRED", "SERVICE_UNAVAILABLE", "TIMEOUT"),
    "filesystem": ("EIO", "ENOSPC", "EROFS", "ETIMEDOUT"),
    "records": ("INDEX_UNAVAILABLE", "QUERY_TIMEOUT", "INTERNAL_ERROR", "SERVICE_UNAVAILABLE"),
    "payments": ("PROCESSOR_UNAVAILABLE", "IDEMPOTENCY_CONFLICT", "INTERNAL_ERROR", "TIMEOUT"),
}
DIRECTIVE_WEIGHTS = {"inject_error": 5, "empty_result": 3, "page_size": 3, "rate_limit": 2, "auth_failure": 2,
                     "partial_success": 3, "verbose": 2}

Progress = Callable[[int, int], None]


def check_corpus_folder(corpus: str | Path) -> None:
    """InvalidInput naming `corpus` when it is not a folder (a corpus is the folder `wmstudio corpus` writes)."""
    if not Path(corpus).is_dir():
        raise InvalidInput(Problem(str(corpus), "not a folder: give the folder `wmstudio corpus --out` wrote"))


@dataclass
class GeneratedRow:
    """One generated row and the split it belongs to; `data` is the JSON object written on its line."""

    index: int
    split: str
    data: dict[str, Any]


def write_corpus(out: Path, rows: int, seed: int, progress: Progress | None = None, synthetic: int = 0,
                 synthetic_seed: int = 0, synthetic_share: float = SYNTHETIC_SHARE,
                 preset: str | None = None, oracle_share: float = ORACLE_SHARE, shapes: bool = False
                 ) -> dict[str, Any]:
    """Write `train.jsonl`, `eval.jsonl` and `test.jsonl` (80/10/10) under `out`, and `stats.json` (what a model
    card trained on it cites); return the stats.

    Same arguments give byte-identical files; `progress(done, total)` is called as rows are written. `synthetic`
    worlds (of generator seed `synthetic_seed`) give `synthetic_share` of the rows, held out whole (corpus_plan.py;
    `synthetic_worlds.json` lists each split's worlds); `preset` makes every row a stress preset's (presets.py);
    `oracle_share` of the rows are rendered with grounding `oracle`, the rest `none` (0: every row as the world model
    is used by default); `shapes` gives the synthetic worlds the shapes' tools (world/synth/shapes.py).
    Stats: rows per split and per world (synthetic worlds counted together), invalid calls, rows with directives
    and with grounding oracle, seconds."""
    started = time.perf_counter()
    out = _check_request(out, rows, seed)
    out.mkdir(parents=True, exist_ok=True)
    temporary = {split: out / f".{split}.jsonl.tmp" for split in SPLITS}
    handles = {split: path.open("w", encoding="utf-8", newline="\n") for split, path in temporary.items()}
    stats: dict[str, Any] = {
        "out": str(out), "rows": 0, "seed": seed, "splits": dict.fromkeys(SPLITS, 0), "worlds": {},
        "invalid_calls": 0, "error_responses": 0, "with_directives": 0, "oracle_grounding": 0,
    }
    try:
        for row in iter_corpus(rows, seed, synthetic, synthetic_seed, synthetic_share, preset, oracle_share,
                               shapes):
            handles[row.split].write(json.dumps(row.data, ensure_ascii=False) + "\n")
            meta = row.data["meta"]
            stats["rows"] += 1
            stats["splits"][row.split] += 1
            world = "synthetic" if is_synthetic(meta["world"]) else meta["world"]
            stats["worlds"][world] = stats["worlds"].get(world, 0) + 1
            stats["invalid_calls"] += meta["invalid_call"]
            stats["error_responses"] += '"status":"error"}' in row.data["messages"][-1]["content"]
            stats["with_directives"] += bool(meta["directives"])
            stats["oracle_grounding"] += meta["grounding"] == ORACLE
            if progress is not None and (stats["rows"] % 100 == 0 or stats["rows"] == rows):
                progress(stats["rows"], rows)
    except BaseException:
        for split, path in temporary.items():
            handles[split].close()
            path.unlink(missing_ok=True)
        raise
    for handle in handles.values():
        handle.close()
    for split, path in temporary.items():
        path.replace(out / f"{split}.jsonl")
    if synthetic:
        themes = split_themes(synthetic, synthetic_seed)
        held = {"seed": synthetic_seed, **world_splits(synthetic, synthetic_seed, shapes), "themes": themes}
        (out / "synthetic_worlds.json").write_text(json.dumps(held, indent=1) + "\n", encoding="utf-8")
        stats["synthetic_worlds"] = {split: len(held[split]) for split in SPLITS}
        stats["synthetic_themes"] = {split: len(themes[split]) for split in SPLITS}
        stats["synthetic_seed"] = synthetic_seed  # a card cites it: the same worlds come back only with it
        if shapes:
            stats["synthetic_shapes"] = True
    if preset:
        stats["preset"] = preset
    if oracle_share != ORACLE_SHARE:
        stats["oracle_share"] = oracle_share
    stats["worlds"] = dict(sorted(stats["worlds"].items()))
    stats["seconds"] = round(time.perf_counter() - started, 2)
    kept = {key: value for key, value in stats.items() if key not in ("out", "seconds")}  # what a model card cites
    (out / "stats.json").write_text(json.dumps({**kept, "out": out.name}, indent=2) + "\n", encoding="utf-8")
    return stats


def iter_corpus(rows: int, seed: int, synthetic: int = 0, synthetic_seed: int = 0,
                synthetic_share: float = SYNTHETIC_SHARE, preset: str | None = None,
                oracle_share: float = ORACLE_SHARE, shapes: bool = False) -> Iterator[GeneratedRow]:
    """The corpus rows in order, each with its split; row i depends only on the arguments and i.

    Worlds take turns; splits come from a seeded shuffle so each holds every demo world, and synthetic worlds are
    held out whole (corpus_plan.py); a row whose text repeats an earlier row is drawn again, so no row is in two
    splits."""
    _check_request(Path("."), rows, seed)
    plan = corpus_plan(rows, seed, synthetic, synthetic_seed, synthetic_share, shapes)
    if preset is not None:
        stress_preset(preset)  # an unknown name is refused before any row is made
    seen: set[bytes] = set()
    for index in range(rows):
        rng = random.Random(f"wmstudio-corpus/{seed}/{index}")
        simulator = SIMULATORS[plan[index].world]
        for _ in range(50):
            data = corpus_row(simulator, rng, preset, oracle_share)
            key = hashlib.blake2b(json.dumps(data["messages"]).encode(), digest_size=16).digest()
            if key not in seen:
                break
        seen.add(key)
        yield GeneratedRow(index=index, split=plan[index].split, data=data)


def corpus_row(simulator: Simulator, rng: random.Random, preset: str | None = None,
               oracle_share: float = ORACLE_SHARE) -> dict[str, Any]:
    """One row: a random initial state, 0-6 earlier steps played by the scripted agent, then the target call.

    The response is the simulator's ground truth under the row's directives; `meta` holds what
    `check_step` needs to re-check the row (world, initial_state, call, history, directives) and its grounding
    (world/grounding.py: `none` or `oracle`, what the prompt was rendered with). A `preset` draws the episode
    that stress preset describes instead (stress.py) and writes its directives into the world."""
    if preset is not None:
        return _stress_row(simulator, rng, preset, oracle_share)
    initial = simulator.initial_state(rng)
    state, history = initial, []
    for _ in range(rng.randint(0, MAX_HISTORY)):
        call = simulator.agent_call(state, rng, invalid=rng.random() < HISTORY_INVALID_SHARE)
        state, response = simulator.step(state, call)
        history.append(HistoryStep(call=call, response=response))
    invalid = rng.random() < INVALID_SHARE
    call = simulator.agent_call(state, rng, invalid=invalid)
    history = with_issuing_page(simulator, state, call, history)
    grounding = ORACLE if rng.random() < oracle_share else NONE  # drawn whatever the share: one seed, one state
    directives = sample_directives(simulator.name, rng, getattr(simulator, "injected_errors", None)) \
        if rng.random() < DIRECTIVE_SHARE else []
    _, response = simulator.step(state, call, directives)
    world = simulator.world(initial, directives)
    chat = render_chat(world, call, history, response=response, grounding=grounding)
    return {
        "dataset": f"wmstudio-sim/{simulator.name}",
        "messages": chat["messages"],
        "meta": {"world": simulator.name, "initial_state": initial, "call": call.to_json(),
                 "history": [step.to_json() for step in history],
                 "directives": directives, "grounding": grounding, "invalid_call": invalid},
    }


def with_issuing_page(simulator: Simulator, state: Any, call: Call, history: list[HistoryStep]) -> list[HistoryStep]:
    """`history` ending with the page that gave the page token `call` passes, when the scripted agent drew a
    continuation whose first page no earlier step asked for: an agent pages on only with a token an answer gave it,
    and the world refuses one it never issued (world/checks/refused_requests.py)."""
    name = unissued_token(call, history)
    if name is None:
        return history
    first = Call(call.name, {key: value for key, value in call.arguments.items() if key != name})
    after, response = simulator.step(state, first)
    issued = after == state and call.arguments[name] in json_leaves(response)
    return [*history, HistoryStep(call=first, response=response)] if issued else history


def _stress_row(simulator: Simulator, rng: random.Random, preset: str, oracle_share: float) -> dict[str, Any]:
    """A row of the episode stress preset `preset` describes (stress.py), with its directives in the world."""
    episode = stress_episode(simulator, rng, preset)
    grounding = ORACLE if rng.random() < oracle_share else NONE
    _, response = simulator.step(episode.state, episode.call, episode.directives)
    world = simulator.world(episode.initial, episode.directives)
    chat = render_chat(world, episode.call, episode.history, response=response, grounding=grounding)
    return {
        "dataset": f"wmstudio-sim/{simulator.name}",
        "messages": chat["messages"],
        "meta": {"world": simulator.name, "initial_state": episode.initial, "call": episode.call.to_json(),
                 "history": [step.to_json() for step in episode.history], "directives": episode.directives,
                 "grounding": grounding, "invalid_call": episode.invalid, "preset": preset},
    }


def sample_directives(world: str, rng: random.Random, errors: tuple[str, ...] | None = None) -> list[str]:
    """One vocabulary directive (sometimes two, of different kinds) as the canonical text a world carries;
    `errors`: the codes inject_error may name (default: the demo world's own)."""
    kinds = list(DIRECTIVE_WEIGHTS)
    chosen = rng.choices(kinds, weights=list(DIRECTIVE_WEIGHTS.values()))
    if rng.random() < 0.15:
        second = rng.choice([k for k in ("verbose", "page_size", "partial_success") if k != chosen[0]])
        chosen.append(second)
    texts = []
    for kind in chosen:
        value: str | int | None = None
        if kind == "inject_error":
            value = rng.choice(errors or INJECTED_ERRORS.get(world, ("INTERNAL_ERROR", "SERVICE_UNAVAILABLE")))
        elif kind == "page_size":
            value = rng.randint(1, 4)
        texts.append(Directive(kind, value).text())
    return texts


_split_plan = split_plan  # (moved to corpus_plan.py)


def _check_request(out: Path, rows: Any, seed: Any) -> Path:
    problems = []
    if isinstance(rows, bool) or not isinstance(rows, int) or not 3 <= rows <= MAX_ROWS:
        problems.append(Problem("rows", f"must be a whole number from 3 to {MAX_ROWS:,}, got {rows!r}"))
    if isinstance(seed, bool) or not isinstance(seed, int):
        problems.append(Problem("seed", f"must be a whole number, got {seed!r}"))
    out = Path(out)
    if out.exists() and not out.is_dir():
        problems.append(Problem("out", f"{out} is a file: give a folder for train.jsonl, eval.jsonl and test.jsonl"))
    if problems:
        raise InvalidInput(problems)
    return out
