"""`world-model`: the world model answers every call, under the scenario's steering, the episode's earlier answers
as its history; no simulator is needed (a world without one is played on its initial state)."""

from wmstudio.train.agent.environment_kind import WORLD_MODEL, CallToAnswer, EnvironmentKind


def _answer(call: CallToAnswer) -> str:
    return call.model()


ENVIRONMENT = EnvironmentKind(WORLD_MODEL, "the world model answers every call", needs_model=True,
                              needs_simulator=False, answer=_answer, order=0)
