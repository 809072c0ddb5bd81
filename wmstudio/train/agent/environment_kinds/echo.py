"""`echo`: a world with no model, the floor a world model must beat as an agent's environment: a steered call
answers its pins (a pinned error, a pinned partial result), every other call `{"status": "ok"}`. What an agent
learns here it learns from the steering alone."""

import json

from wmstudio.train.agent.environment_kind import CallToAnswer, EnvironmentKind
from wmstudio.world.jsonpath import set_path


def _answer(call: CallToAnswer) -> str:
    answer: dict = {"status": "ok"}
    for anchor in call.anchors:
        try:
            answer = set_path(answer, anchor.path, anchor.value)
        except TypeError:  # a path through a value of another kind: the pin cannot be written
            continue
    return json.dumps(answer, ensure_ascii=False, separators=(",", ":"))


ENVIRONMENT = EnvironmentKind("echo", "no model: a steered call answers its pins, every other call status ok",
                              needs_model=False, needs_simulator=False, answer=_answer, source="echo", order=3)
