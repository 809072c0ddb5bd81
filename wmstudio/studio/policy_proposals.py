"""A trained agent policy proposes a rollout's next call: the shipped SFT policy or a finished GRPO run's.

The rollout's world version and its steps so far are what the policy reads (as in training), so a person can see
what the agent would do next, edit the proposed call, and let the world model answer it."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path

from wmstudio.locations import REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.store import Store, get_rollout, get_world, list_runs, rollout_steps
from wmstudio.train.agent.agent_config import DEFAULT_POLICY, POLICY_MARKER
from wmstudio.train.agent.agent_policy import AgentPolicy, load_policy
from wmstudio.train.agent.run_files import POLICY_DIR, run_folder
from wmstudio.train.agent.scenarios import Scenario, Step, Trajectory
from wmstudio.world.spec import Call

SHIPPED_POLICY = REPO_ROOT / DEFAULT_POLICY
_LOADED: dict[Path, tuple[int, AgentPolicy]] = {}  # folder -> (policy.json's mtime, policy): a rewrite reloads
_LOCK = threading.Lock()  # one load per folder, and one act at a time on a shared model


@dataclass(frozen=True)
class Proposal:
    """What the policy would do next: make `call`, or end the episode with `final_answer`; `task` is what it
    worked on (the typed task, or the world's)."""

    task: str
    call: Call | None = None
    final_answer: str = ""

    @property
    def call_text(self) -> str:
        """The call as JSON for the Rollouts tab's call box ("" when the policy answers instead)."""
        return json.dumps(self.call.to_json(), indent=2, ensure_ascii=False) if self.call is not None else ""


def policy_choices(store: Store) -> list[tuple[str, str]]:
    """(label, folder) of each policy that can propose calls: the shipped SFT policy, then each training run
    whose final policy exists, newest first (`run #3 · world-model · GRPO`)."""
    choices = [(f"{SHIPPED_POLICY.name} · shipped SFT policy", str(SHIPPED_POLICY))]
    for run in list_runs(store):
        folder = run_folder(run.id, store.path) / POLICY_DIR
        if (folder / POLICY_MARKER).is_file():
            choices.append((f"run #{run.id} · {run.config.get('env', '?')} · GRPO", str(folder)))
    return choices


def propose_next_call(store: Store, rollout_id: int | None, policy_path: str | Path | None,
                      task_text: str | None = None) -> Proposal:
    """Ask the policy at `policy_path` for the rollout's next action, the task being `task_text` or else the
    world's own; InvalidInput names the rollout, policy or task field when one is missing or wrong."""
    if rollout_id is None:
        raise InvalidInput(Problem("rollout", "open a rollout first (pick one in the list or start a new one)"))
    rollout = get_rollout(store, rollout_id)
    world = get_world(store, rollout.world_id).spec()
    task = (task_text or "").strip() or world.task.strip()
    if not task:
        raise InvalidInput(Problem("task", f"world {world.name!r} has no task: type the task the policy should "
                                           "work on, e.g. 'The customer wants to cancel order ORD-1.'"))
    steps = [Step(step.tool_call(), step.response) for step in rollout_steps(store, rollout_id)]
    scenario = Scenario(f"rollout-{rollout_id}", "rollout", world, task)
    with _LOCK:
        action = _policy(policy_path).act(scenario, Trajectory(steps))
    if isinstance(action, Call):
        return Proposal(task, call=action)
    return Proposal(task, final_answer=action)


def _policy(path: str | Path | None) -> AgentPolicy:
    """The policy saved in folder `path`, loaded once (again only when its policy.json changes); call under _LOCK."""
    if path is None or not str(path).strip():
        raise InvalidInput(Problem("policy", "choose a policy (the shipped SFT policy or a finished training run)"))
    folder = Path(str(path).strip()).expanduser().resolve()
    marker = folder / POLICY_MARKER
    if not marker.is_file():
        raise InvalidInput(Problem("policy", f"{str(path)!r} is not an agent policy folder (no {POLICY_MARKER}): "
                                             "choose one from the list, or wait until the training run finishes"))
    stamp = marker.stat().st_mtime_ns
    if folder not in _LOADED or _LOADED[folder][0] != stamp:
        _LOADED[folder] = (stamp, load_policy(folder))
    return _LOADED[folder][1]
