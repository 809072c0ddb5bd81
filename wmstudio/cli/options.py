"""Command-line options built from the typed settings the studio also uses (`SamplerSettings`, `TrainConfig`,
`AgentTrainConfig`, `GrpoSettings`): a setting is declared once, with its default and help, in its dataclass.

A field `name` becomes `--name` (underscores as dashes); a bool that defaults to true also gets `--no-name`."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

import typer

from wmstudio.cli.common import fail
from wmstudio.problems import InvalidInput
from wmstudio.settings import setting_specs
from wmstudio.world.grounding import Grounding

GROUNDING_HELP = ("What the world model's prompts may hold beyond the five parts: none (it tracks the state from the "
                  "initial state and the episode's answers: what it gets wherever it stands in for an environment) or "
                  "oracle (a simulator's replayed state and retrieval, labelled as the oracle's).")


def grounding_option() -> Any:
    """The one `--grounding` option of every command, for a parameter annotated `Grounding`: typer reads it as the
    enum (a bad value exits 2 naming the option and the choices)."""
    return typer.Option(Grounding.NONE, "--grounding", help=GROUNDING_HELP, case_sensitive=False)


def option_parameters(config_type: type, skip: Iterable[str] = ()) -> list[inspect.Parameter]:
    """One keyword parameter per field of the dataclass `config_type` (but `skip`), each a typer Option with the
    field's default and help text (a field named in the class's REQUIRED has no default)."""
    hints = typing.get_type_hints(config_type)
    parameters = []
    for spec in setting_specs(config_type):
        if spec.name in skip:
            continue
        required = spec.default is None and spec.name in getattr(config_type, "REQUIRED", ())
        default = ... if required else spec.form_default  # 0 where 0 means automatic or off, as every door says
        flag = "--" + spec.name.replace("_", "-")
        names = [f"{flag}/--no-{flag[2:]}"] if spec.default is True else [flag]
        option = typer.Option(default, *names, help=spec.help)
        parameters.append(inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=hints[spec.name]))
    return parameters


def settings_from_options(config_type: type, values: dict[str, Any]) -> Any:
    """`config_type(**values)`; a bad value exits 2 naming its option (`--steps must be ...`), one line each."""
    try:
        return config_type(**values)
    except InvalidInput as err:
        fail("\n".join(f"--{p.path.replace('_', '-')} {p.message}" for p in err.problems))


def config_command(parent: typer.Typer, name: str, config_type: type, run: Callable[[Any], None],
                   summary: str | None = None, hidden: bool = False) -> None:
    """Add command `name` whose options are the fields of the dataclass `config_type`, so a setting is declared
    once; `run` gets the built config. `summary` says what the command does (default: the first paragraph of the
    class's docstring)."""

    def command(**values: Any) -> None:
        run(settings_from_options(config_type, values))

    command.__signature__ = inspect.Signature(option_parameters(config_type))
    command.__doc__ = summary or config_type.__doc__.split("\n\n")[0]
    parent.command(name, hidden=hidden)(command)


def with_settings(config_type: type, skip: Iterable[str] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command `fn(..., settings: dict)`: its own parameters, then one option per field of
    `config_type` (but `skip`); `fn` gets those fields' values as the dict `settings` and builds the settings
    itself (`settings_from_options`) once the input it reads first is checked."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn)
        own = [p.replace(annotation=hints.get(name, p.annotation))
               for name, p in inspect.signature(fn).parameters.items() if name != "settings"]
        added = option_parameters(config_type, skip)
        names = [p.name for p in added]

        def command(**values: Any) -> Any:
            return fn(**{k: v for k, v in values.items() if k not in names},
                      settings={name: values[name] for name in names})

        command.__signature__ = inspect.Signature(own + added)
        command.__doc__ = fn.__doc__
        command.__name__ = fn.__name__
        return command

    return wrap
