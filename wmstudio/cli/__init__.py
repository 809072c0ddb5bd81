"""The `wmstudio` command: every capability of the studio, scriptable from a terminal.

Commands print JSON on stdout, warnings on stderr, and exit 0 (ok), 1 (checked and failed) or
2 (bad input, with a message naming the file, field and fix). One module per command group; each imports what
is heavy (torch, Gradio, TRL) inside its commands, so `wmstudio --help` stays fast."""

from __future__ import annotations

import typer

from wmstudio.cli import agent, generate, model, rollouts, serving, worlds
from wmstudio.cli.common import ErrorBoundary

app = typer.Typer(
    cls=ErrorBoundary,
    help="World Model Studio: steered rollouts from a masked diffusion text world model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
for commands in (worlds.commands, serving.commands, generate.commands, agent.commands, model.aliases):
    app.add_typer(commands)  # top-level commands
for group, name in ((worlds.tools_app, "tools"), (worlds.worlds_app, "worlds"), (worlds.history_app, "history"),
                    (model.model_app, "model"), (rollouts.rollouts_app, "rollouts"),
                    (rollouts.curricula_app, "curricula"), (agent.runs_app, "runs"), (serving.space_app, "space"),
                    (generate.bench_app, "bench")):
    app.add_typer(group, name=name)


def main() -> None:  # pragma: no cover - console entry
    app()
