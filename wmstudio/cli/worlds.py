"""World files and what is read from them: `validate`, `check`, `prompt`, `corpus`, `presets`, `tools import`,
`worlds synth` and `history import` (what the World tab does, from a terminal)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from wmstudio.cli.common import (
    ANCHOR_HELP,
    HISTORY_HELP,
    PRESET_HELP,
    check_out_file,
    check_out_folder,
    check_parents,
    emit,
    fail,
    load_world,
    read_call,
    read_history,
)
from wmstudio.cli.options import grounding_option
from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.grounding import ORACLE_SHARE, Grounding
from wmstudio.world.tools.formats import FORMATS

commands = typer.Typer()
tools_app = typer.Typer(help="Import tool schemas from the formats people already have.", no_args_is_help=True)
worlds_app = typer.Typer(help="Generated worlds: procedural synthetic worlds with a simulator each.",
                         no_args_is_help=True)
history_app = typer.Typer(help="Read earlier steps from trajectory files (OpenAI messages, tau-bench, chat rows).",
                          no_args_is_help=True)


@commands.command()
def validate(world: Path = typer.Argument(..., help="World file (JSON) to check.")) -> None:
    """Load a world file and report every problem with its JSON path."""
    spec = load_world(world)
    typer.echo(f"ok: world {spec.name!r} with {len(spec.tools)} tools and {len(spec.rules)} rules")


@tools_app.command("import")
def tools_import(
    path: Path = typer.Argument(..., help="File with tool definitions (JSON, JSON Lines or YAML)."),
    fmt: str = typer.Option("auto", "--format", "-f", help="|".join(FORMATS)),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the JSON list here instead of stdout."),
) -> None:
    """Print (or write) the tools of PATH as a normalised JSON list of OpenAI-style functions."""
    from wmstudio.world.tools import import_tools_file

    check_out_file(out)
    result = import_tools_file(path, fmt)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    emit([tool.to_json() for tool in result.tools], out)


@commands.command()
def check(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    response: Path = typer.Option(..., "--response", help="The tool response to check (a file)."),
    anchor: list[str] = typer.Option([], "--anchor", help=ANCHOR_HELP),
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
) -> None:
    """Check a response against JSON, the tool's response schema, the world's rules and the anchors."""
    from wmstudio.world.steering.anchors import anchor_problems, parse_anchor

    anchors = [parse_anchor(text) for text in anchor]  # named before the world's CEL rules load (a second)
    from wmstudio.world.checks.report import check_step

    spec = load_world(world)
    the_call = read_call(call)
    try:
        problems = anchor_problems(anchors, spec.tool(the_call.name).response)
    except KeyError:
        problems = []  # an unknown tool: check_step names the tools there are
    if problems:
        raise InvalidInput(problems)
    steps = read_history(history)
    text = _read_response(response)
    report = check_step(spec, the_call, text, anchors=anchors, history=steps)
    emit(report.to_json())
    raise typer.Exit(0 if report.ok else 1)


def _read_response(path: Path) -> str:
    """The response to check, as text; JSON in it must keep within the input limits (nesting, numbers, lone
    surrogates), while text that is not JSON is checked (and fails) rather than refused."""
    from wmstudio.world.input_limits import MAX_RESPONSE_BYTES, InputRefused, loads_limited, read_limited

    if path.is_dir():
        raise InvalidInput(f"{path}: is a folder: give the file holding the response")
    text = read_limited(path, MAX_RESPONSE_BYTES, "for a response").decode("utf-8", errors="replace")
    try:
        loads_limited(text)
    except InputRefused as err:
        raise InvalidInput(f"{path}: {err}") from None
    except json.JSONDecodeError:
        pass  # not JSON: the check says so (exit 1)
    return text


@commands.command()
def prompt(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help="Call JSON file."),
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    max_chars: Optional[int] = typer.Option(None, "--max-chars", min=200,
                                            help="Fit the prompt in N characters (what was left out goes to stderr)."),
    fmt: str = typer.Option("sections", "--format",
                            help="sections (plain prompt), chat (one messages row) or patronus (a chat row in the "
                                 "Patronus paper's layout: user turn `State: ...\\n\\nAction: ...`)."),
    grounding: Grounding = grounding_option(),
) -> None:
    """Render the world-model prompt for a call, in the section format or as a chat row; --grounding shows what
    each grounding puts in it."""
    from wmstudio.world.prompt.patronus import render_patronus
    from wmstudio.world.prompt.render import PromptBudget, render

    if fmt not in ("sections", "chat", "patronus"):
        fail(f"--format {fmt!r} is not known: use sections, chat or patronus")
    grounded = grounding  # read by the option (cli/options.py)
    spec = load_world(world)
    the_call = read_call(call)
    steps = read_history(history)
    budget = PromptBudget(max_chars) if max_chars is not None else None
    if fmt == "patronus":
        rendered = render_patronus(spec, the_call, steps, budget, grounded)
    else:
        rendered = render(spec, the_call, steps, budget, grounded, chat=fmt == "chat")
    if rendered.cut:  # with no limit, only what is not call-local is left out (records the call does not name)
        reason = f"to fit {max_chars} characters " if max_chars is not None else ""
        typer.echo(f"note: {reason}the prompt left out: {'; '.join(rendered.cut)}", err=True)
    if fmt == "sections":
        typer.echo(rendered.text)
    else:
        emit(rendered.chat())


@commands.command()
def corpus(
    out: Path = typer.Option(..., "--out", help="Folder for train.jsonl, eval.jsonl and test.jsonl."),
    rows: int = typer.Option(10000, "--rows", min=3, help="Total rows over the three splits."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same files."),
    synthetic: int = typer.Option(0, "--synthetic", help="Also N synthetic worlds (at least 3), held out whole: "
                                                         "the test split holds only worlds never trained on."),
    synthetic_seed: int = typer.Option(0, "--synthetic-seed", help="Generator seed of the synthetic worlds."),
    synthetic_share: float = typer.Option(0.5, "--synthetic-share", help="Share of the rows from synthetic worlds."),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
    oracle_share: float = typer.Option(ORACLE_SHARE, "--oracle-share", min=0.0, max=1.0,
                                       help="Share of rows whose prompt holds the simulator's state (grounding oracle); "
                                            "the rest are grounding none, as the world model is used (0: all none)."),
    shapes: bool = typer.Option(False, "--shapes", help="Give the synthetic worlds the shapes' tools: lookups by a "
                                                        "name or an email, records with their own records, union "
                                                        "and text answers, nested filters."),
) -> None:
    """Write a world-model corpus from the simulated worlds (and synthetic ones), in the public chat format."""
    from wmstudio.world.corpus.rows import write_corpus

    check_parents(out)
    emit(write_corpus(out, rows=rows, seed=seed, synthetic=synthetic, synthetic_seed=synthetic_seed,
                      synthetic_share=synthetic_share, preset=preset, oracle_share=oracle_share, shapes=shapes))


@commands.command("presets")
def presets_cmd(
    world: Optional[Path] = typer.Option(None, "--world", help="World file: show the anchors that fit --tool."),
    tool: Optional[str] = typer.Option(None, "--tool", help="The tool to be called (with --world)."),
) -> None:
    """List the stress presets: the directives and anchors each adds (`generate`/`corpus --preset NAME`)."""
    from wmstudio.world.steering.presets import presets_json

    chosen = None
    if world is not None:
        spec = load_world(world)
        try:
            chosen = spec.tool(tool or spec.tools[0].name) if spec.tools else None
        except KeyError as err:
            raise InvalidInput(Problem("--tool", str(err).strip("'\""))) from None
    emit(presets_json(chosen))


@worlds_app.command("synth")
def worlds_synth(
    out: Path = typer.Option(..., "--out", help="Folder for the world files."),
    count: int = typer.Option(10, "--count", min=1, help="How many worlds."),
    seed: int = typer.Option(0, "--seed", min=0, help="Generator seed: same seed, same files."),
    shapes: bool = typer.Option(False, "--shapes", help="Also a tool of each shape a user's own world has: a lookup "
                                                        "by a name or an email, a record with its own records, a "
                                                        "union answer, a text answer, a nested filter."),
) -> None:
    """Write COUNT procedurally generated worlds; each names its generic simulator (synthetic:<seed>:<index>, with
    :shapes after it for --shapes)."""
    from wmstudio.world.synth.worlds import write_worlds

    check_out_folder(out)
    emit(write_worlds(out, count=count, seed=seed, shapes=shapes))


@history_app.command("import")
def history_import(
    path: Path = typer.Argument(..., help="Steps, an OpenAI message list, tau-bench results or a State: chat row."),
    index: Optional[int] = typer.Option(None, "--index", help="Which trajectory of a file of several (from 0)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the JSON list here instead of stdout."),
) -> None:
    """Print (or write) the history in PATH as the JSON list [{"call": ..., "response": ...}] --history takes."""
    from wmstudio.world.trajectories import read_history_file

    check_out_file(out)
    emit([step.to_json() for step in read_history_file(path, index)], out)
