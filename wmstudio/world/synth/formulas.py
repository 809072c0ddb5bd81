"""The arithmetic a synthetic world derives its numbers with, drawn per world so no formula is a demo world's.

A formula reads two shown numbers, `a` (an amount the call gives) and `p` (a per-unit price or rate the record
holds), and constants drawn per world; each family evaluates in Python, renders as CEL for the rules and in words
for the prompt, and all three agree (CEL's integer division truncates like Python's `//` on these non-negative
numbers)."""

from __future__ import annotations

import random

from wmstudio.world.synth.blueprint import Formula

# family -> (CEL with {a} {p} {k0}, words with {a} {p} {k0})
FAMILIES = {
    "fee": ("{a} * {p} + {k0}", "{a} × {p} plus a flat {k0}"),
    "discount": ("{a} * {p} - {a} * {p} * {k0} / 100", "{a} × {p} less {k0}% (rounded down)"),
    "tax": ("{a} * {p} + {a} * {p} * {k0} / 100", "{a} × {p} plus {k0}% (rounded down)"),
    "surcharge": ("{a} * ({p} + {k0})", "{a} × ({p} + {k0})"),
    "floor": ("({a} * {p} < {k0} ? {k0} : {a} * {p})", "{a} × {p}, but never less than {k0}"),
}
CONSTANTS = {"fee": (35, 99, 150, 249, 300, 475), "discount": (5, 10, 15, 20, 25), "tax": (6, 8, 12, 19, 21),
             "surcharge": (15, 40, 75, 120), "floor": (500, 1000, 1500, 2500)}
USAGES = (1, 1, 2, 3, 5, 10)  # quantity an action uses per unit of its amount


def draw_formula(rng: random.Random) -> Formula:
    """A formula family and its constant."""
    family = rng.choice(sorted(FAMILIES))
    return Formula(family, (rng.choice(CONSTANTS[family]),))


def evaluate(formula: Formula, a: int, p: int) -> int:
    """The formula's value for amount `a` and per-unit `p`."""
    k0 = formula.k[0]
    if formula.family == "fee":
        return a * p + k0
    if formula.family == "discount":
        return a * p - a * p * k0 // 100
    if formula.family == "tax":
        return a * p + a * p * k0 // 100
    if formula.family == "surcharge":
        return a * (p + k0)
    if formula.family == "floor":
        return max(a * p, k0)
    raise ValueError(formula.family)


def cel(formula: Formula, a: str, p: str) -> str:
    """The formula as a CEL expression over the CEL expressions `a` and `p`."""
    return "(" + FAMILIES[formula.family][0].format(a=a, p=p, k0=formula.k[0]) + ")"


def words(formula: Formula, a: str, p: str) -> str:
    """The formula in words over the names `a` and `p`."""
    return FAMILIES[formula.family][1].format(a=a, p=p, k0=formula.k[0])
