"""Which response schema a canvas is laid out from: the called tool's own (of a union, the branch of the record the
call names: world/tools/unions.py), else the one its earlier answers in the history fit, else the one the model was
trained with for it (none: a free canvas)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmstudio.model.canvas.canvas import OUTCOME_KEY, OUTCOME_VALUES
from wmstudio.model.network.trained_schemas import TrainedSchemas
from wmstudio.problems import InvalidInput
from wmstudio.world.episode.state import state_after
from wmstudio.world.history import HistoryStep
from wmstudio.world.records import named_record_at
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.schema_inference import history_answers, sized_schema
from wmstudio.world.tools.unions import answer_branch, object_branches

FROM_TOOL, FROM_HISTORY, FROM_TRAINING = "tool", "history", "training"
MAX_OTHER_OUTCOMES, MAX_OUTCOME_CHARS = 3, 16  # a status besides ok / error that is still an outcome word


def response_schema(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                    trained: TrainedSchemas | None = None) -> dict[str, Any] | None:
    """The called tool's response schema, else the one its earlier answers in `history` fit, else the one the
    model was trained with for it (`trained`: a backend's `trained_schemas`), else None."""
    return schema_and_source(world, call, history, trained)[0]


def schema_and_source(world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                      trained: TrainedSchemas | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """(response_schema, where it came from: FROM_TOOL, FROM_HISTORY or FROM_TRAINING; None when there is none)."""
    tool = called_tool(world, call)
    if tool.response is not None:
        if object_branches(tool.response):  # a union: the branch of the record the call names
            found = named_record_at(state_after(world, history), call)
            return answer_branch(tool.response, found[1] if found is not None else None), FROM_TOOL
        return tool.response, FROM_TOOL
    answers = history_answers(call.name, history)
    if answers:
        return schema_of_answers(answers), FROM_HISTORY
    kept = trained.schema_for(world, call) if trained is not None else None
    return (kept, FROM_TRAINING) if kept is not None else (None, None)


def schema_of_answers(answers: list[dict[str, Any]]) -> dict[str, Any]:
    """The schema a tool's JSON-object `answers` fit, strings sized by them. A top-level status the answers give as
    ok or error, and at most a few other words (a booking's "partial"), becomes a choice of ok, error and those
    words: an outcome is a choice, not text (a ticket's "open" or "closed", never ok or error, stays text)."""
    schema = sized_schema(answers)
    outcome = schema.get("properties", {}).get(OUTCOME_KEY)
    seen = {answer.get(OUTCOME_KEY) for answer in answers}
    others = sorted(word for word in seen - set(OUTCOME_VALUES) if isinstance(word, str))
    if (isinstance(outcome, dict) and outcome.get("type") == "string" and seen & set(OUTCOME_VALUES)
            and len(others) == len(seen - set(OUTCOME_VALUES)) <= MAX_OTHER_OUTCOMES
            and all(0 < len(word) <= MAX_OUTCOME_CHARS for word in others)):
        outcome["enum"] = [*OUTCOME_VALUES, *others]
        outcome.pop("maxLength", None)
    return schema


def called_tool(world: WorldSpec, call: Call):
    """The world's tool the call names; InvalidInput naming it when the world has none by that name."""
    try:
        return world.tool(call.name)
    except KeyError as err:
        raise InvalidInput(str(err.args[0]) if err.args else f"no tool named {call.name!r}") from None
