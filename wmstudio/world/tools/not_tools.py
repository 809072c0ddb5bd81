"""Files that are not tool files: recognise what they hold and say what to import instead.

ToolEmu test cases, trajectories, chat rows and tau2 tasks sit beside the tool files they use and are
easily picked by mistake; read as tools they would become tools with a name and nothing else."""

from __future__ import annotations

from typing import Any

from wmstudio.problems import Problem

HISTORY = "read it with `wmstudio history import FILE` (add --index N to pick one of several)"
KNOWN_SHAPES = (  # (keys every entry has, what the file looks like, what to do instead)
    ({"Toolkits", "User Instruction"}, "ToolEmu test cases (name, Toolkits, User Instruction)",
     "import the toolkit file (all_toolkits.json) instead"),
    ({"user_scenario", "evaluation_criteria"}, "tau2 tasks (user_scenario, evaluation_criteria)",
     "import the domain's tools instead (their openai_schema list or Tool.model_dump records)"),
    ({"simulations"}, "tau2 results (simulations)", f"they hold trajectories, not tools: {HISTORY}"),
    ({"traj"}, "tau-bench trajectories (traj)", f"they hold trajectories, not tools: {HISTORY}"),
    ({"messages"}, "chat rows or trajectories (messages)", f"they hold conversations, not tools: {HISTORY}"),
    ({"role", "content"}, "chat messages (role, content)", f"a conversation is not a tool file: {HISTORY}"),
)


def non_tool_problem(raw: Any, root: str = "") -> Problem | None:
    """A problem saying what `raw` looks like when every entry in it has the keys of a known non-tool file."""
    entries = raw if isinstance(raw, list) else [raw]
    if not entries or not all(isinstance(entry, dict) for entry in entries):
        return None
    for keys, what, fix in KNOWN_SHAPES:
        if all(keys <= set(entry) for entry in entries):
            return Problem(root, f"looks like {what}, not tool definitions: {fix}")
    return None
