"""`hybrid`: the world model answers the calls whose outcome a task turns on (the state-changing tools the tasks ask
for: a refund, a booking, a move), the simulator everything it computes exactly (lookups, listings, logins), as
the paper's RL loop answered most calls from a deterministic responder and the world model the rest."""

from wmstudio.train.agent.environment_kind import CallToAnswer, EnvironmentKind
from wmstudio.train.agent.scenarios import TASKS


def _answer(call: CallToAnswer) -> str:
    return call.model() if call.call.name in TASKS else call.truth_text()


ENVIRONMENT = EnvironmentKind("hybrid", "the world model answers the calls a task turns on, the simulators the rest",
                              needs_model=True, needs_simulator=True, answer=_answer, order=2)
