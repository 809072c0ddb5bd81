"""Grounding: what a world-model prompt may hold beyond the five parts, one explicit and recorded setting.

`none` (the default everywhere the world model stands in for an environment): the initial state, the task and the
history as the world model saw it, the tools, the rules and the steering; the model tracks the state itself.
`oracle`: a simulator's state replayed over the history and its computed retrieval for the call, named as the
simulator's in the prompt. The paper added such hindsight notes to most *training* rows; at inference they are the
answer, so they are used only when asked for by name."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from wmstudio.problems import InvalidInput, Problem


class Grounding(StrEnum):
    """The one type of a grounding: read from outside once (`parse_grounding`), compared and stored as its text."""

    NONE = "none"
    ORACLE = "oracle"


NONE, ORACLE = Grounding.NONE, Grounding.ORACLE
ORACLE_SHARE = 0.4  # a corpus's rows whose prompt holds the simulator's state and retrieval (oracle); the rest none
GROUNDINGS = tuple(Grounding)


def parse_grounding(value: Any, field: str = "grounding") -> Grounding:
    """`value` from outside (a form, a request, a corpus row) as a Grounding; a corpus row's old boolean flag reads
    True as oracle, False as none."""
    if isinstance(value, Grounding):
        return value
    if value is True:
        return ORACLE
    if value is False or value is None:
        return NONE
    if isinstance(value, str) and value.strip().lower() in GROUNDINGS:
        return Grounding(value.strip().lower())
    raise InvalidInput(Problem(field, f"{value!r} is not a grounding: use {' or '.join(GROUNDINGS)} (none: the "
                                      "world model tracks the state itself; oracle: a simulator's state in the prompt)"))
