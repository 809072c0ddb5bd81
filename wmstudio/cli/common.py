"""What every command group shares: the one error boundary, output (JSON on stdout, `error: ...` on stderr with
exit 2), checks of an `--out` path, and readers of the files the commands take.

Nothing heavy is imported here: `wmstudio --help` and refused input never load torch, Gradio or TRL."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperGroup

from wmstudio.problems import InvalidInput

HISTORY_HELP = ("Earlier steps: a list of {call, response}, an OpenAI message list, a tau-bench trajectory record "
                "or a Patronus `State:` chat row (see `wmstudio history import`).")
PRESET_HELP = ("Stress preset: adjacent-info, insufficient-info, long-output, impossible, pagination or "
               "error-cascade (its directives and anchors; see `wmstudio presets`).")
DB_HELP = "SQLite file (default: WMSTUDIO_DB or the user data dir)."
ANCHOR_HELP = 'Pinned field, PATH=VALUE (JSON value): status="error".'


class ErrorBoundary(TyperGroup):
    """The command's one error boundary: bad input (InvalidInput) raised anywhere below a command, or a world-model
    server that cannot answer, ends it with `error: <the message>` on stderr and exit 2, never a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except InvalidInput as err:
            fail(str(err))
        except RuntimeError as err:  # click's Exit is one too: pass on all but a world model that cannot answer
            remote = sys.modules.get("wmstudio.model.serving.remote_world_model")  # not loaded: not its error
            if remote is not None and isinstance(err, remote.WorldModelUnavailable):
                fail(str(err))
            raise


def fail(message: str, code: int = 2) -> None:
    """Print `error: message` on stderr and exit with `code` (2 = bad input)."""
    from wmstudio.world.input_limits import printable

    typer.echo(f"error: {printable(message)}", err=True)  # a file name that is not UTF-8 still prints
    raise typer.Exit(code)


def emit(data: Any, out: Optional[Path] = None) -> None:
    """Write JSON to `out` or stdout."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if out is None:
        typer.echo(text)
        return
    check_out_file(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    except OSError as err:
        fail(f"--out {out}: cannot be written ({err.strerror or err}): choose a writable path")


def check_out_file(out: Optional[Path]) -> None:
    """Exit 2 when `--out` cannot be a file: it is a folder, or a folder on its way is a file."""
    if out is None:
        return
    if out.is_dir():
        fail(f"--out {out}: is a folder: give a file path such as {out / 'out.json'}")
    check_parents(out)


def check_out_folder(out: Optional[Path]) -> None:
    """Exit 2 when `--out` cannot be a folder: it is a file, or a folder on its way is a file."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file: give a folder (it is created when missing)")
    check_parents(out)


def check_parents(out: Path) -> None:
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                fail(f"--out {out}: {parent} is a file, not a folder: give a path inside a folder")
            return


def load_world(path: Path):
    from wmstudio.world.spec import load_world as load

    return load(path)


def read_json(path: Path, what: str) -> Any:
    from wmstudio.world.spec import read_json_file

    try:
        return read_json_file(path)
    except InvalidInput as err:
        raise InvalidInput(err.problems, source=f"{what} file") from None


def read_call(path: Path):
    """The call in a call file (`{"name": ..., "arguments": {...}}`)."""
    from wmstudio.world.spec import Call

    return Call.from_json(read_json(path, "call"), source="call")


def read_history(path: Optional[Path]) -> list:
    """Earlier steps from a history file in any shape `wmstudio history import` reads (none when no file is given)."""
    from wmstudio.world.trajectories import read_history_file

    return read_history_file(path) if path else []


def open_store(db: Optional[Path]):
    """The studio's database (opened, upgraded)."""
    from wmstudio.studio.worlds import open_studio_store

    return open_studio_store(db)
