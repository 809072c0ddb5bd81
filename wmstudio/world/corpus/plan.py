"""Which world and split each corpus row comes from: the five demo worlds, and synthetic worlds held out whole.

Demo rows take the worlds in turn and split 80/10/10 by a seeded shuffle of rows (as they always have). Synthetic
worlds split about 80/10/10 *by theme*: every row of a world goes to its world's split, and every world of a theme to
the same split, so the test split holds only worlds of themes (hence nouns, ids and keys named after them) the model
never trained on. Synthetic rows are spread evenly among the demo rows and take their worlds in turn."""

from __future__ import annotations

import random
from dataclasses import dataclass

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, whole_in
from wmstudio.world.simulators import SIMULATORS
from wmstudio.world.synth.generate import theme_of
from wmstudio.world.synth.registry import synthetic_ref

SPLITS = ("train", "eval", "test")
SPLIT_SHARES = (0.8, 0.1, 0.1)
SYNTHETIC_SHARE = 0.5  # of the rows, when synthetic worlds are asked for
MAX_SYNTHETIC = 100_000
MIN_SYNTHETIC = 3  # one world for each split


@dataclass(frozen=True)
class RowPlan:
    """Row i's world (a simulator name) and split."""

    world: str
    split: str


def split_plan(rows: int, seed: int) -> list[str]:
    """Split of each row index: exact 80/10/10 counts (each split non-empty from 3 rows), seeded order."""
    eval_count = max(1, round(rows * SPLIT_SHARES[1]))
    test_count = max(1, round(rows * SPLIT_SHARES[2]))
    labels = ["eval"] * eval_count + ["test"] * test_count
    labels = ["train"] * (rows - len(labels)) + labels
    random.Random(f"wmstudio-corpus-splits/{seed}").shuffle(labels)
    return labels


def world_splits(count: int, seed: int, shapes: bool = False) -> dict[str, list[str]]:
    """Synthetic worlds 0..count-1 of generator seed `seed` by split, held out by theme (module docstring); with
    `shapes`, the same worlds with the shapes' tools (world/synth/shapes.py).

    The worlds' themes, in a seeded order, go to test until it holds 10% of the worlds, then to eval until it does,
    then to train. With so few worlds that train would get none, the worlds themselves split 10/10/80."""
    themes = [theme_of(seed, i).domain for i in range(count)]
    order = sorted(set(themes))
    random.Random(f"wmstudio-synthetic-splits/{seed}").shuffle(order)
    held = max(1, round(count * SPLIT_SHARES[2]))
    split_of_theme, sizes = {}, {"test": 0, "eval": 0}
    for theme in order:
        split = next((name for name in ("test", "eval") if sizes[name] < held), "train")
        split_of_theme[theme] = split
        if split != "train":
            sizes[split] += themes.count(theme)
    chosen = {"test": [], "eval": [], "train": []}
    for index, theme in enumerate(themes):
        chosen[split_of_theme[theme]].append(index)
    if not chosen["train"] or not chosen["eval"]:
        shuffled = list(range(count))
        random.Random(f"wmstudio-synthetic-splits/{seed}").shuffle(shuffled)
        chosen = {"test": shuffled[:held], "eval": shuffled[held: 2 * held], "train": shuffled[2 * held:]}
    return {split: [synthetic_ref(seed, i, shapes) for i in sorted(indexes)] for split, indexes in chosen.items()}


def split_themes(count: int, seed: int) -> dict[str, list[str]]:
    """The themes (domains) of each split's synthetic worlds, for a corpus's record."""
    by_split = world_splits(count, seed)
    return {split: sorted({theme_of(seed, i).domain for i in range(count) if synthetic_ref(seed, i) in refs})
            for split, refs in by_split.items()}


def corpus_plan(rows: int, seed: int, synthetic: int = 0, synthetic_seed: int = 0,
                synthetic_share: float = SYNTHETIC_SHARE, shapes: bool = False) -> list[RowPlan]:
    """The world and split of every row (see the module docstring); without synthetic worlds, the demo corpus."""
    demo = sorted(SIMULATORS)
    if not synthetic:
        return [RowPlan(demo[i % len(demo)], split) for i, split in enumerate(split_plan(rows, seed))]
    check_synthetic(synthetic, synthetic_seed, synthetic_share)
    is_synthetic = [int((i + 1) * synthetic_share) > int(i * synthetic_share) for i in range(rows)]
    demo_splits = iter(split_plan(max(3, rows - sum(is_synthetic)), seed))
    by_world = {ref: split for split, refs in world_splits(synthetic, synthetic_seed, shapes).items() for ref in refs}
    refs = [synthetic_ref(synthetic_seed, i, shapes) for i in range(synthetic)]
    plan, made, turn = [], 0, 0
    for synthetic_row in is_synthetic:
        if synthetic_row:
            ref = refs[made % synthetic]
            plan.append(RowPlan(ref, by_world[ref]))
            made += 1
        else:
            plan.append(RowPlan(demo[turn % len(demo)], next(demo_splits)))
            turn += 1
    return plan


def check_synthetic(synthetic: object, synthetic_seed: object, synthetic_share: object) -> None:
    """InvalidInput naming each bad synthetic setting."""
    problems = []
    if not whole_in(synthetic, MIN_SYNTHETIC, MAX_SYNTHETIC):
        problems.append(Problem("synthetic", f"must be 0 or a whole number from {MIN_SYNTHETIC} (one world per split) "
                                             f"to {MAX_SYNTHETIC:,}, got {synthetic!r}"))
    if not whole_in(synthetic_seed, 0):
        problems.append(Problem("synthetic_seed", f"must be a whole number from 0, got {synthetic_seed!r}"))
    if not number_in(synthetic_share, high=1, above=0):
        problems.append(Problem("synthetic_share", f"must be a share above 0 and at most 1, got {synthetic_share!r}"))
    if problems:
        raise InvalidInput(problems)
