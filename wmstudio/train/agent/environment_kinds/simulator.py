"""`simulator`: the world's exact simulator answers every call (ground truth, under the same steering)."""

from wmstudio.train.agent.environment_kind import SIMULATOR, CallToAnswer, EnvironmentKind


def _answer(call: CallToAnswer) -> str:
    return call.truth_text()


ENVIRONMENT = EnvironmentKind(SIMULATOR, "the worlds' exact simulators answer", needs_model=False,
                              needs_simulator=True, answer=_answer, order=1)
