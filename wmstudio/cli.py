"""The `wmstudio` command: every capability of the studio, scriptable from a terminal.

Commands print JSON on stdout, warnings on stderr, and exit 0 (ok), 1 (checked and failed) or
2 (bad input, with a message naming the file, field and fix)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from wmstudio.world.problems import InvalidInput

app = typer.Typer(
    help="World Model Studio: steered rollouts from a masked diffusion text world model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tools_app = typer.Typer(help="Import tool schemas from the formats people already have.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")


def fail(message: str, code: int = 2) -> None:
    """Print `error: message` on stderr and exit with `code` (2 = bad input)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def emit(data: Any, out: Optional[Path] = None) -> None:
    """Write JSON to `out` or stdout."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if out is None:
        typer.echo(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


def _load_world(path: Path):
    from wmstudio.world.spec import load_world

    return load_world(path)


def _read_json(path: Path, what: str) -> Any:
    from wmstudio.world.spec import read_json_file

    try:
        return read_json_file(path)
    except InvalidInput as err:
        raise InvalidInput(err.problems, source=f"{what} file") from None


@app.command()
def validate(world: Path = typer.Argument(..., help="World file (JSON) to check.")) -> None:
    """Load a world file and report every problem with its JSON path."""
    try:
        spec = _load_world(world)
    except InvalidInput as err:
        fail(str(err))
    typer.echo(f"ok: world {spec.name!r} with {len(spec.tools)} tools and {len(spec.rules)} rules")


@tools_app.command("import")
def tools_import(
    path: Path = typer.Argument(..., help="File with tool definitions (JSON, JSON Lines or YAML)."),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto|openai|mcp|bfcl|toolemu|tau|api-bank|swe-agent"),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the JSON list here instead of stdout."),
) -> None:
    """Print (or write) the tools of PATH as a normalised JSON list of OpenAI-style functions."""
    from wmstudio.world.tools import import_tools_file

    try:
        result = import_tools_file(path, fmt)
    except InvalidInput as err:
        fail(str(err))
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    emit([tool.to_json() for tool in result.tools], out)


@app.command()
def check(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    response: Path = typer.Option(..., "--response", help="The tool response to check (a file)."),
    anchor: list[str] = typer.Option([], "--anchor", help='Pinned field, PATH=VALUE (JSON value): status="error".'),
    history: Optional[Path] = typer.Option(None, "--history", help="Earlier steps, a JSON list of {call, response}."),
) -> None:
    """Check a response against JSON, the tool's response schema, the world's rules and the anchors."""
    from wmstudio.world.anchors import parse_anchor
    from wmstudio.world.checks import check_step
    from wmstudio.world.spec import Call

    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        anchors = [parse_anchor(text) for text in anchor]
        steps = _read_json(history, "history") if history else []
        if not response.exists():
            raise InvalidInput(f"{response}: no such file")
        text = response.read_bytes().decode("utf-8", errors="replace")
        report = check_step(spec, the_call, text, anchors=anchors, history=steps)
    except InvalidInput as err:
        fail(str(err))
    emit(report.to_json())
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def prompt(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help="Call JSON file."),
    history: Optional[Path] = typer.Option(None, "--history", help="Earlier steps, a JSON list of {call, response}."),
    max_chars: Optional[int] = typer.Option(None, "--max-chars", min=200, help="Middle-truncate the history to fit."),
    fmt: str = typer.Option("sections", "--format", help="sections (plain prompt) or chat (one messages row)."),
) -> None:
    """Render the world-model prompt for a call, in the section format or as a chat row."""
    from wmstudio.world.prompt import render_chat, render_prompt
    from wmstudio.world.spec import Call

    if fmt not in ("sections", "chat"):
        fail(f"--format {fmt!r} is not known: use sections or chat")
    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        steps = _read_json(history, "history") if history else []
        if fmt == "sections":
            typer.echo(render_prompt(spec, the_call, steps, max_chars=max_chars))
        else:
            emit(render_chat(spec, the_call, steps, max_chars=max_chars))
    except InvalidInput as err:
        fail(str(err))


@app.command()
def corpus(
    out: Path = typer.Option(..., "--out", help="Folder for train.jsonl, eval.jsonl and test.jsonl."),
    rows: int = typer.Option(10000, "--rows", min=3, help="Total rows over the three splits."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same files."),
) -> None:
    """Write a world-model corpus from the simulated worlds, in the public chat format."""
    from wmstudio.world.corpus import write_corpus

    try:
        stats = write_corpus(out, rows=rows, seed=seed)
    except InvalidInput as err:
        fail(str(err))
    emit(stats)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(7860, "--port"),
    db: Optional[Path] = typer.Option(None, "--db", help="SQLite file (default: WMSTUDIO_DB or the user data dir)."),
    model: Optional[str] = typer.Option(None, "--model", help="World model: local path or hub id (default: embedded)."),
    ar_model: Optional[str] = typer.Option(None, "--ar-model", help="Autoregressive baseline (default: embedded)."),
    auth: list[str] = typer.Option([], "--auth", help="Require sign-in: USER:PASSWORD, repeat for more annotators."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow checkpoints' own model code."),
) -> None:
    """Open the studio in the browser at http://HOST:PORT."""
    from wmstudio.model.backends import DEFAULT_AR_MODEL
    from wmstudio.ui.studio import launch

    users = {}
    for item in auth:
        user, sep, password = item.partition(":")
        if not sep or not user or not password:
            fail(f"--auth {item!r}: write USER:PASSWORD, e.g. --auth alice:s3cret")
        users[user] = password
    try:
        launch(host=host, port=port, db=db, model=model, ar_model=ar_model or DEFAULT_AR_MODEL,
               trust_remote_code=trust_remote_code, users=users)
    except InvalidInput as err:
        fail(str(err))


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
