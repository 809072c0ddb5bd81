"""Which world and split each corpus row comes from: the five demo worlds, and synthetic worlds held out whole.

Demo rows take the worlds in turn and split 80/10/10 by a seeded shuffle of rows (as they always have). Synthetic
worlds split 80/10/10 *as worlds*: every row of a world goes to its world's split, so the test split holds only worlds
the model never trained on. Synthetic rows are spread evenly among the demo rows and take their worlds in turn."""

from __future__ import annotations

import random
from dataclasses import dataclass

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, whole_in
from wmstudio.world.simulators import SIMULATORS
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


def world_splits(count: int, seed: int) -> dict[str, list[str]]:
    """Synthetic worlds 0..count-1 of generator seed `seed` by split: 10% eval and 10% test (at least one each),
    the rest train, chosen by a seeded shuffle."""
    order = list(range(count))
    random.Random(f"wmstudio-synthetic-splits/{seed}").shuffle(order)
    held = max(1, round(count * SPLIT_SHARES[2]))
    chosen = {"test": order[:held], "eval": order[held: 2 * held], "train": order[2 * held:]}
    return {split: [synthetic_ref(seed, i) for i in sorted(indexes)] for split, indexes in chosen.items()}


def corpus_plan(rows: int, seed: int, synthetic: int = 0, synthetic_seed: int = 0,
                synthetic_share: float = SYNTHETIC_SHARE) -> list[RowPlan]:
    """The world and split of every row (see the module docstring); without synthetic worlds, the demo corpus."""
    demo = sorted(SIMULATORS)
    if not synthetic:
        return [RowPlan(demo[i % len(demo)], split) for i, split in enumerate(split_plan(rows, seed))]
    check_synthetic(synthetic, synthetic_seed, synthetic_share)
    is_synthetic = [int((i + 1) * synthetic_share) > int(i * synthetic_share) for i in range(rows)]
    demo_splits = iter(split_plan(max(3, rows - sum(is_synthetic)), seed))
    by_world = {ref: split for split, refs in world_splits(synthetic, synthetic_seed).items() for ref in refs}
    refs = [synthetic_ref(synthetic_seed, i) for i in range(synthetic)]
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
