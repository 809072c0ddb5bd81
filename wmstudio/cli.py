"""The `wmstudio` command: every capability of the studio, scriptable from a terminal.

Commands print JSON on stdout, warnings on stderr, and exit 0 (ok), 1 (checked and failed) or
2 (bad input, with a message naming the file, field and fix)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

import typer
from typer.core import TyperCommand

from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent_config import AgentTrainConfig, GrpoSettings
from wmstudio.train.chat_scoring import DEFAULT_CHAT_LENGTH
from wmstudio.train.config import TrainConfig

app = typer.Typer(
    help="World Model Studio: steered rollouts from a masked diffusion text world model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
HISTORY_HELP = ("Earlier steps: a list of {call, response}, an OpenAI message list, a tau-bench trajectory record "
                "or a Patronus `State:` chat row (see `wmstudio history import`).")
PRESET_HELP = ("Stress preset: adjacent-info, insufficient-info, long-output, impossible, pagination or "
               "error-cascade (its directives and anchors; see `wmstudio presets`).")
tools_app = typer.Typer(help="Import tool schemas from the formats people already have.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")


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
    _check_out_file(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")
    except OSError as err:
        fail(f"--out {out}: cannot be written ({err.strerror or err}): choose a writable path")


def _check_out_file(out: Optional[Path]) -> None:
    """Exit 2 when `--out` cannot be a file: it is a folder, or a folder on its way is a file."""
    if out is None:
        return
    if out.is_dir():
        fail(f"--out {out}: is a folder: give a file path such as {out / 'out.json'}")
    _check_parents(out)


def _check_out_folder(out: Optional[Path]) -> None:
    """Exit 2 when `--out` cannot be a folder: it is a file, or a folder on its way is a file."""
    if out is None:
        return
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: is a file: give a folder (it is created when missing)")
    _check_parents(out)


def _check_parents(out: Path) -> None:
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                fail(f"--out {out}: {parent} is a file, not a folder: give a path inside a folder")
            return


def _load_world(path: Path):
    from wmstudio.world.spec import load_world

    return load_world(path)


def _read_json(path: Path, what: str) -> Any:
    from wmstudio.world.spec import read_json_file

    try:
        return read_json_file(path)
    except InvalidInput as err:
        raise InvalidInput(err.problems, source=f"{what} file") from None


def _read_history(path: Optional[Path]) -> list:
    """Earlier steps from a history file in any shape `wmstudio history import` reads (none when no file is given)."""
    from wmstudio.world.trajectories import read_history_file

    return read_history_file(path) if path else []


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

    _check_out_file(out)
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
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
) -> None:
    """Check a response against JSON, the tool's response schema, the world's rules and the anchors."""
    from wmstudio.world.anchors import anchor_problems, parse_anchor

    try:
        anchors = [parse_anchor(text) for text in anchor]
    except InvalidInput as err:
        fail(str(err))  # named before the world's CEL rules load (a second)
    from wmstudio.world.checks import check_step
    from wmstudio.world.spec import Call

    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        try:
            problems = anchor_problems(anchors, spec.tool(the_call.name).response)
        except KeyError:
            problems = []  # an unknown tool: check_step names the tools there are
        if problems:
            raise InvalidInput(problems)
        steps = _read_history(history)
        text = _read_response(response)
        report = check_step(spec, the_call, text, anchors=anchors, history=steps)
    except InvalidInput as err:
        fail(str(err))
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


@app.command()
def prompt(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help="Call JSON file."),
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    max_chars: Optional[int] = typer.Option(None, "--max-chars", min=200,
                                            help="Fit the prompt in N characters (what was left out goes to stderr)."),
    fmt: str = typer.Option("sections", "--format",
                            help="sections (plain prompt), chat (one messages row) or patronus (a chat row in the "
                                 "Patronus paper's layout: user turn `State: ...\\n\\nAction: ...`)."),
) -> None:
    """Render the world-model prompt for a call, in the section format or as a chat row."""
    from wmstudio.world.patronus_prompt import render_patronus
    from wmstudio.world.prompt import PromptBudget, render
    from wmstudio.world.spec import Call

    if fmt not in ("sections", "chat", "patronus"):
        fail(f"--format {fmt!r} is not known: use sections, chat or patronus")
    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        steps = _read_history(history)
        budget = PromptBudget(max_chars) if max_chars is not None else None
        if fmt == "patronus":
            rendered = render_patronus(spec, the_call, steps, budget)
        else:
            rendered = render(spec, the_call, steps, budget, chat=fmt == "chat")
    except InvalidInput as err:
        fail(str(err))
    if rendered.cut:  # with no limit, only what is not call-local is left out (records the call does not name)
        reason = f"to fit {max_chars} characters " if max_chars is not None else ""
        typer.echo(f"note: {reason}the prompt left out: {'; '.join(rendered.cut)}", err=True)
    if fmt == "sections":
        typer.echo(rendered.text)
    else:
        emit(rendered.chat())


@app.command()
def corpus(
    out: Path = typer.Option(..., "--out", help="Folder for train.jsonl, eval.jsonl and test.jsonl."),
    rows: int = typer.Option(10000, "--rows", min=3, help="Total rows over the three splits."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same files."),
    synthetic: int = typer.Option(0, "--synthetic", help="Also N synthetic worlds (at least 3), held out whole: "
                                                         "the test split holds only worlds never trained on."),
    synthetic_seed: int = typer.Option(0, "--synthetic-seed", help="Generator seed of the synthetic worlds."),
    synthetic_share: float = typer.Option(0.5, "--synthetic-share", help="Share of the rows from synthetic worlds."),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP),
) -> None:
    """Write a world-model corpus from the simulated worlds (and synthetic ones), in the public chat format."""
    from wmstudio.world.corpus import write_corpus

    _check_parents(out)
    try:
        stats = write_corpus(out, rows=rows, seed=seed, synthetic=synthetic, synthetic_seed=synthetic_seed,
                             synthetic_share=synthetic_share, preset=preset)
    except InvalidInput as err:
        fail(str(err))
    emit(stats)


@app.command("presets")
def presets_cmd(
    world: Optional[Path] = typer.Option(None, "--world", help="World file: show the anchors that fit --tool."),
    tool: Optional[str] = typer.Option(None, "--tool", help="The tool to be called (with --world)."),
) -> None:
    """List the stress presets: the directives and anchors each adds (`generate`/`corpus --preset NAME`)."""
    from wmstudio.world.presets import presets_json

    try:
        chosen = None
        if world is not None:
            spec = _load_world(world)
            try:
                chosen = spec.tool(tool or spec.tools[0].name) if spec.tools else None
            except KeyError as err:
                raise InvalidInput(Problem("--tool", str(err).strip("'\""))) from None
    except InvalidInput as err:
        fail(str(err))
    emit(presets_json(chosen))


worlds_app = typer.Typer(help="Generated worlds: procedural synthetic worlds with a simulator each.",
                         no_args_is_help=True)
app.add_typer(worlds_app, name="worlds")


@worlds_app.command("synth")
def worlds_synth(
    out: Path = typer.Option(..., "--out", help="Folder for the world files."),
    count: int = typer.Option(10, "--count", min=1, help="How many worlds."),
    seed: int = typer.Option(0, "--seed", min=0, help="Generator seed: same seed, same files."),
) -> None:
    """Write COUNT procedurally generated worlds; each names its generic simulator (synthetic:<seed>:<index>)."""
    from wmstudio.world.synth.generate import write_worlds

    _check_out_folder(out)
    try:
        stats = write_worlds(out, count=count, seed=seed)
    except InvalidInput as err:
        fail(str(err))
    emit(stats)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host", envvar="GRADIO_SERVER_NAME",
                             help="Address to serve on (a Space sets GRADIO_SERVER_NAME); one other than loopback "
                                  "(127.0.0.1, localhost, ::1) needs --auth or --insecure-no-auth, except on a Space."),
    port: int = typer.Option(7860, "--port"),
    db: Optional[Path] = typer.Option(None, "--db", help="SQLite file (default: WMSTUDIO_DB or the user data dir)."),
    model: Optional[str] = typer.Option(None, "--model", help="World model: local path or hub id (default: embedded)."),
    ar_model: Optional[str] = typer.Option(None, "--ar-model", help="Autoregressive baseline (default: embedded)."),
    auth: list[str] = typer.Option([], "--auth", help="Require sign-in: USER:PASSWORD, repeat for more annotators."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow checkpoints' own model code."),
    overlap: int = typer.Option(2, "--overlap", min=1, help="Annotators who rate each step before new steps are "
                                                             "served (agreement needs steps rated twice)."),
    insecure_no_auth: bool = typer.Option(False, "--insecure-no-auth",
                                          help="Serve on a --host other than loopback without --auth: anyone who "
                                               "can reach it can read and change the studio's data."),
    api_key: Optional[str] = typer.Option(None, "--api-key", envvar="WMSTUDIO_API_KEY",
                                          help="Key for the world-model HTTP API served beside the studio (/v1/...); "
                                               "needed for it on a --host other than loopback."),
) -> None:
    """Open the studio in the browser at http://HOST:PORT (a HOST other than 127.0.0.1 needs --auth), with the
    world-model HTTP API of `serve-wm` beside it under /v1 (on loopback, or with --api-key)."""
    from wmstudio.ui.access import exposure

    users = {}
    for item in auth:
        user, sep, password = item.partition(":")
        if not sep or not user or not password:
            fail(f"--auth {item!r}: write USER:PASSWORD, e.g. --auth alice:s3cret")
        users[user] = password
    opened = exposure(host, users, insecure_no_auth, port)
    if opened.refusal is not None:
        fail(opened.refusal)
    if opened.warning is not None:
        typer.echo(f"warning: {opened.warning}", err=True)
    from wmstudio.ui.studio import launch

    try:
        launch(host=host, port=port, db=db, model=model, ar_model=ar_model or DEFAULT_AR_MODEL,
               trust_remote_code=trust_remote_code, users=users, overlap=overlap, insecure_no_auth=insecure_no_auth,
               on_started=lambda studio, ctx: _mount_world_api(studio, ctx, host, api_key))
    except InvalidInput as err:
        fail(str(err))


def _mount_world_api(studio, ctx, host: str, api_key: Optional[str]) -> None:
    """The world-model HTTP API beside the studio, on the studio's loaded model (not on an open host without a key)."""
    from wmstudio.network import is_loopback
    from wmstudio.serve.http_api import mount_beside_studio

    if not is_loopback(host) and not api_key:
        typer.echo(f"note: the world-model API (/v1/...) is not served on {host} without --api-key", err=True)
        return
    mount_beside_studio(studio.app, ctx.backend(), ctx.store, api_key, host)


@app.command("serve-wm")
def serve_wm(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to serve on; one other than loopback needs --api-key."),
    port: int = typer.Option(8000, "--port"),
    model: Optional[str] = typer.Option(None, "--model", help="World model: local path or hub id (default: embedded)."),
    api_key: Optional[str] = typer.Option(None, "--api-key", envvar="WMSTUDIO_API_KEY",
                                          help="Require `Authorization: Bearer KEY` on every route but the "
                                               "health probes (/openenv included)."),
    db: Optional[Path] = typer.Option(None, "--db", help="The studio's SQLite file: worlds named in requests and "
                                                         "curricula for the OpenEnv server (default: the studio's)."),
    world: Optional[str] = typer.Option(None, "--world", help="World for chat-format and proxy requests that name "
                                                              "none: a saved world's name or a world file."),
    batching: str = typer.Option("auto", "--batching", help="on: share denoising forwards between requests that "
                                                            "arrive together; off; auto: on with a GPU only."),
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", min=0.01, help="Refuse request bodies over this size."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow checkpoints' own model code."),
) -> None:
    """Serve the world model over HTTP for external trainers: /v1/world/step, the paper's /v1/world/proxy payload,
    OpenAI /v1/chat/completions, and an OpenEnv environment under /openenv."""
    from wmstudio.model.backends import load_backend
    from wmstudio.serve.server import refuse_open_binding, run
    from wmstudio.serve.service import WorldModelService
    from wmstudio.store.seeding import seed_first_run
    from wmstudio.studio.world_step import resolve_world

    try:
        refuse_open_binding(host, api_key)
        store = _store(db)
        seed_first_run(store)
        default_world = None
        if world:
            default_world = _load_world(Path(world)) if Path(world).is_file() else resolve_world(world, store)
        backend = load_backend(model, trust_remote_code=trust_remote_code)
        if batching not in ("auto", "on", "off"):
            fail(f"--batching {batching!r}: use on, off or auto")
        service = WorldModelService.create(backend, batching={"auto": None, "on": True, "off": False}[batching],
                                           store=store, world=default_world, api_key=api_key,
                                           max_body_bytes=int(max_body_mb * 1_000_000))
        typer.echo(f"serving {backend.name} on http://{host}:{port} (batching "
                   f"{'on' if service.batcher else 'off'})", err=True)
        run(service, host=host, port=port)
    except InvalidInput as err:
        fail(str(err))


space_app = typer.Typer(help="The Hugging Face Space: assemble a deployable folder.", no_args_is_help=True)
app.add_typer(space_app, name="space")


@space_app.command("build")
def space_build(
    out: Path = typer.Argument(..., help="Folder to write the Space into (new or empty)."),
    hardware: str = typer.Option("cpu-upgrade", "--hardware", help="suggested_hardware of the Space "
                                                                   "(zero-a10g runs the denoising on ZeroGPU)."),
    model_repo: list[str] = typer.Option([], "--model-repo", help="Hub model ids to list under `models`."),
    force: bool = typer.Option(False, "--force", help="Replace the contents of a non-empty OUT."),
) -> None:
    """Assemble the Space: package, embedded models, demo worlds, entry app.py, requirements and README."""
    from wmstudio.serve.space import build_space

    try:
        built = build_space(out, hardware=hardware, models=model_repo, force=force)
    except InvalidInput as err:
        fail(str(err))
    emit({"folder": str(built.folder), "front_matter": built.front_matter, "requirements": built.requirements})


# --- histories (earlier steps) from the trajectory files people already have ---------------------------

history_app = typer.Typer(help="Read earlier steps from trajectory files (OpenAI messages, tau-bench, chat rows).",
                          no_args_is_help=True)
app.add_typer(history_app, name="history")


@history_app.command("import")
def history_import(
    path: Path = typer.Argument(..., help="Steps, an OpenAI message list, tau-bench results or a State: chat row."),
    index: Optional[int] = typer.Option(None, "--index", help="Which trajectory of a file of several (from 0)."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the JSON list here instead of stdout."),
) -> None:
    """Print (or write) the history in PATH as the JSON list [{"call": ..., "response": ...}] --history takes."""
    from wmstudio.world.trajectories import read_history_file

    _check_out_file(out)
    try:
        steps = read_history_file(path, index)
    except InvalidInput as err:
        fail(str(err))
    emit([step.to_json() for step in steps], out)


# --- rollouts and curricula in the studio's database (what the Rollouts tab does) -------------------------

rollouts_app = typer.Typer(help="Rollouts saved in the studio's database: list, show, export.", no_args_is_help=True)
curricula_app = typer.Typer(help="Curricula (versioned sets of accepted rollouts): list, create, export, import.",
                            no_args_is_help=True)
app.add_typer(rollouts_app, name="rollouts")
app.add_typer(curricula_app, name="curricula")
DB_HELP = "SQLite file (default: WMSTUDIO_DB or the user data dir)."


def _store(db: Optional[Path]):
    from wmstudio.store import open_store

    try:
        return open_store(db)
    except InvalidInput as err:
        fail(str(err))


def _summary_json(summary) -> dict[str, Any]:
    return {"id": summary.id, "world": summary.world_name, "world_version": summary.world_version,
            "title": summary.title, "status": summary.status, "tags": summary.tags, "steps": summary.step_count,
            "failed_steps": summary.failed_steps, "parent_rollout_id": summary.parent_rollout_id,
            "created_at": summary.created_at.isoformat()}


@rollouts_app.command("list")
def rollouts_list(
    world: Optional[str] = typer.Option(None, "--world", help="Only rollouts in this world (any version)."),
    status: Optional[str] = typer.Option(None, "--status", help="pending, accepted or rejected."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Only rollouts with this tag."),
    text: Optional[str] = typer.Option(None, "--text", help="Text in a call, a response or the title."),
    page: int = typer.Option(1, "--page", help="Page number, from 1 (newest first)."),
    page_size: int = typer.Option(50, "--page-size", help="Rollouts per page."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """List rollouts matching the filters (the Rollouts tab's search), newest first."""
    from wmstudio.store import filter_rollouts

    store = _store(db)
    try:
        found = filter_rollouts(store, world=world, status=status, tag=tag, text=text, page=page,
                                page_size=page_size)
    except InvalidInput as err:
        fail(str(err))
    emit({"total": found.total, "page": found.page, "pages": found.pages, "status_counts": found.status_counts,
          "rollouts": [_summary_json(r) for r in found.items]})


@rollouts_app.command("show")
def rollouts_show(
    rollout_id: int = typer.Argument(..., help="The rollout's id."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Print one rollout: its world, status, tags and every step (call, response, checks, how it was made)."""
    from wmstudio.studio.rollouts import exported_rollout

    store = _store(db)
    try:
        rollout = exported_rollout(store, rollout_id)
    except InvalidInput as err:
        fail(str(err))
    emit(rollout.to_json())


@rollouts_app.command("export")
def rollouts_export(
    rollout_ids: list[int] = typer.Argument(..., help="Ids of the rollouts to export."),
    out: Path = typer.Option(..., "--out", help="Folder to write the dataset into."),
    name: str = typer.Option("wmstudio rollouts", "--name", help="Dataset name in the card."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Export rollouts as a Hugging Face dataset folder (parquet + JSONL chat rows + card), as curricula are."""
    from wmstudio.studio.datasets import export_dataset
    from wmstudio.studio.rollouts import exported_rollout

    _check_out_folder(out)
    store = _store(db)
    try:
        folder = export_dataset([exported_rollout(store, rid) for rid in rollout_ids], out, name)
    except InvalidInput as err:
        fail(str(err))
    emit({"folder": str(folder), "rollouts": len(rollout_ids)})


@rollouts_app.command("import")
def rollouts_import(
    path: Path = typer.Argument(..., help="JSON Lines of world-model chat rows (user turn `State: ...\\n\\nAction: ...`)."),
    world: Optional[Path] = typer.Option(None, "--world", help="The world the rows were made in (default: one "
                                                               "built from the tools the calls name)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Import another project's world-model chat rows (the Patronus format) as new pending rollouts, one per row."""
    from wmstudio.studio.chat_rows import import_chat_rows

    try:
        spec = _load_world(world) if world is not None else None
        result = import_chat_rows(_store(db), path, spec)
    except InvalidInput as err:
        fail(str(err))
    if result.repeated:
        typer.echo(f"note: {path} was imported into that world before: nothing was added; these are the rollouts "
                   "it made", err=True)
    emit({"rollouts": result.rollout_ids, "steps": result.steps})


@curricula_app.command("list")
def curricula_list(db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Every curriculum version: id, name, version, description and how many rollouts it holds."""
    from wmstudio.store import list_curricula

    emit([{"id": s.curriculum.id, "name": s.curriculum.name, "version": s.curriculum.version,
           "description": s.curriculum.description, "rollouts": s.rollout_count}
          for s in list_curricula(_store(db))])


@curricula_app.command("create")
def curricula_create(
    name: str = typer.Argument(..., help="Curriculum name; a new version if it exists."),
    rollout_ids: list[int] = typer.Argument(..., help="Accepted rollouts to add to its latest version."),
    description: str = typer.Option("", "--description", help="What the curriculum is for."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Save the next version of a curriculum: its latest rollouts plus the given ones (accepted rollouts only)."""
    from wmstudio.studio.curricula import add_to_curriculum

    try:
        curriculum, added = add_to_curriculum(_store(db), name, description, rollout_ids)
    except InvalidInput as err:
        fail(str(err))
    emit({"id": curriculum.id, "name": curriculum.name, "version": curriculum.version, "added": added})


@curricula_app.command("export")
def curricula_export(
    name: str = typer.Argument(..., help="Curriculum name."),
    version: Optional[int] = typer.Option(None, "--version", help="Version to export (default: the latest)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder (default: the studio's exports folder)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Write a curriculum version as the dataset folder the studio's Export button writes."""
    from wmstudio.store import get_curriculum
    from wmstudio.studio.curricula import export_curriculum

    _check_out_folder(out)
    store = _store(db)
    try:
        folder, label = export_curriculum(store, get_curriculum(store, name, version).id, out)
    except InvalidInput as err:
        fail(str(err))
    emit({"folder": str(folder), "curriculum": label})


@curricula_app.command("import")
def curricula_import(
    path: Path = typer.Argument(..., help="An exported dataset: its folder, zip, parquet or JSONL file."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Import an exported dataset as new rollouts (worlds are saved as versions)."""
    from wmstudio.studio.curricula import import_dataset_file

    try:
        result = import_dataset_file(_store(db), path)
    except InvalidInput as err:
        fail(str(err))
    if result.repeated:
        typer.echo(f"note: {path} was imported before: nothing was added; these are the rollouts it made", err=True)
    emit({"rollouts": result.rollout_ids, "steps": result.steps})


# --- world-model training and evaluation (trainer) -----------------------------------------------------


def config_command(parent: typer.Typer, name: str, config_type: type, run: Callable[[Any], None],
                   summary: str | None = None) -> None:
    """Add command `name` whose options are the fields of the dataclass `config_type` (help text from each
    field's metadata), so a setting is declared once; `run` gets the built config. `summary` says what the command
    does (default: the first paragraph of the class's docstring)."""
    hints = typing.get_type_hints(config_type)
    parameters = []
    for item in dataclasses.fields(config_type):
        default = ... if item.default is None and item.name in getattr(config_type, "REQUIRED", ()) else item.default
        option = typer.Option(default, "--" + item.name.replace("_", "-"), help=item.metadata.get("help", ""))
        parameters.append(inspect.Parameter(item.name, inspect.Parameter.KEYWORD_ONLY, default=option,
                                            annotation=hints[item.name]))

    def command(**values: Any) -> None:
        try:
            config = config_type(**values)
        except InvalidInput as err:
            fail("\n".join(f"--{p.path.replace('_', '-')} {p.message}" for p in err.problems))
        run(config)

    command.__signature__ = inspect.Signature(parameters)
    command.__doc__ = summary or config_type.__doc__.split("\n\n")[0]
    parent.command(name)(command)


def _train_wm(config) -> None:
    from wmstudio.train.training import train_world_model

    try:
        result = train_world_model(config, log=lambda text: typer.echo(text, err=True))
    except InvalidInput as err:
        fail(str(err))
    emit(result.to_json())


config_command(app, "train-wm", TrainConfig, _train_wm,
               summary="Train a world model on a corpus of chat rows (`wmstudio corpus`): the masked diffusion model "
                       "with its copy and outcome heads, or the AR baseline; weights, tokenizer and "
                       "`training.json` go to --out.")


def _train_agent(config) -> None:
    from wmstudio.train.agent_sft import train_agent

    try:
        info = train_agent(config, log=lambda text: typer.echo(text, err=True))
    except InvalidInput as err:
        fail(str(err))
    emit(info)


config_command(app, "train-agent", AgentTrainConfig, _train_agent)


def _train_grpo(settings) -> None:
    """Run GRPO as a recorded job: the run row (made here unless the studio made it) claimed for this process
    (a second trainer on a run is refused), its status, metrics and episodes through the job reporter, a progress
    line per step on stderr."""
    from wmstudio.train.curriculum_scenarios import curriculum_row, curriculum_scenarios
    from wmstudio.train.grpo import distributed_rank, latest_checkpoint, train_grpo
    from wmstudio.train.jobs import RECORDED_SETTINGS, begin_job, run_folder
    from wmstudio.train.run_files import checkpoint_step

    store = _store(settings.db)
    if distributed_rank() > 0:  # torchrun's other processes: train beside rank 0, which records the run
        if settings.out is None:
            fail("--out: under torchrun give the run folder, which every process shares")
        backend = _world_model(settings.env, settings.model, settings.world_model_url)
        train_grpo(settings, settings.out, backend, log=lambda _: None,
                   curriculum=curriculum_scenarios(store, settings.curriculum))
        return
    try:
        row = curriculum_row(store, settings.curriculum)
        scenarios = curriculum_scenarios(store, settings.curriculum)
        config = {"curriculum": settings.curriculum, "curriculum_version": row.version, "env": settings.env,
                  "max_steps": settings.max_steps, "seed": settings.seed}
        config.update({key: _as_recorded(value) for key in RECORDED_SETTINGS
                       if (value := getattr(settings, key)) is not None})  # `wmstudio runs resume` passes them on
        reporter = begin_job(store, settings.run_id, settings.resume, row.id, config)
    except InvalidInput as err:
        fail(str(err))
    run_id = reporter.run_id
    folder = settings.out or run_folder(run_id)
    folder.mkdir(parents=True, exist_ok=True)
    newest = latest_checkpoint(folder) if settings.resume else None

    def on_metrics(step: int, values: dict[str, float]) -> None:
        reporter.metrics(step, values)
        if not settings.json:
            done = min(1.0, step / settings.max_steps)
            bar = "#" * int(done * 30) + "." * (30 - int(done * 30))
            shown = " ".join(f"{k} {v:.3f}" for k, v in values.items() if k in ("reward", "success", "kl"))
            typer.echo(f"[{bar}] step {step}/{settings.max_steps} {shown}", err=True)

    from wmstudio.model.remote_world_model import WorldModelUnavailable

    reporter.start(resumed_from=(checkpoint_step(newest) if newest else 0) if settings.resume else None)
    try:
        backend = _world_model(settings.env, settings.model, settings.world_model_url)
        result = train_grpo(settings, folder, backend, on_metrics, reporter.episodes,
                            log=lambda text: typer.echo(text, err=True), curriculum=scenarios)
    except (InvalidInput, WorldModelUnavailable) as err:
        reporter.fail(str(err))
        fail(str(err))
    except BaseException as err:
        reporter.fail(f"{type(err).__name__}: {err}")
        raise
    reporter.finish()
    emit({"run_id": run_id, **result.to_json()})


config_command(app, "train-grpo", GrpoSettings, _train_grpo)


def _as_recorded(value: Any) -> Any:
    """A setting as a run records it: a local path made absolute (a resume may start from another folder)."""
    if isinstance(value, Path) or (isinstance(value, str) and value and Path(value).exists()):
        return str(Path(value).resolve())
    return value

runs_app = typer.Typer(help="GRPO training runs: list them, show one, cancel or resume it (what the Train tab does).",
                       no_args_is_help=True)
app.add_typer(runs_app, name="runs")


def _run_json(store, run, detail: bool = False) -> dict[str, Any]:
    """A run as `runs list` / `runs show` print it (show adds the last values, checkpoints and the log's tail)."""
    from wmstudio.store import logged_steps, run_metrics
    from wmstudio.train.jobs import run_checkpoints, run_files_folder
    from wmstudio.train.run_files import log_tail

    when = lambda moment: moment.isoformat(timespec="seconds") if moment else None  # noqa: E731
    data = {"id": run.id, "status": run.status, "curriculum": run.config.get("curriculum"),
            "env": run.config.get("env"), "max_steps": run.config.get("max_steps"),
            "steps_logged": logged_steps(store, [run.id])[run.id], "pid": run.pid, "created": when(run.created_at),
            "started": when(run.started_at), "finished": when(run.finished_at), "error": run.error}
    if detail:
        last: dict[str, dict[str, float]] = {}
        for metric in run_metrics(store, run.id):
            last[metric.name] = {"step": metric.step, "value": metric.value}
        data.update({"config": run.config, "folder": str(run_files_folder(run)), "last_values": last,
                     "checkpoints": [p.name for p in run_checkpoints(run)], "log_tail": log_tail(run.id, 20)})
    return data


@runs_app.command("list")
def runs_list(db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Every run, newest first, with its status as it is now (a run whose process is gone is marked failed)."""
    from wmstudio.store import list_runs
    from wmstudio.train.jobs import refresh_jobs

    store = _store(db)
    refresh_jobs(store)
    emit([_run_json(store, run) for run in list_runs(store)])


@runs_app.command("show")
def runs_show(
    run_id: int = typer.Argument(..., help="The run's id (see `wmstudio runs list`)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """One run: status, settings, last value of each metric, checkpoints and the last lines of its log."""
    from wmstudio.store import get_run
    from wmstudio.train.jobs import refresh_jobs

    store = _store(db)
    try:
        refresh_jobs(store)
        emit(_run_json(store, get_run(store, run_id), detail=True))
    except InvalidInput as err:
        fail(str(err))


@runs_app.command("cancel")
def runs_cancel(
    run_id: int = typer.Argument(..., help="The queued or running run to stop."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Stop a run (SIGTERM, then SIGKILL after 10 s); it is recorded as cancelled and can be resumed."""
    from wmstudio.train.jobs import cancel_job

    store = _store(db)
    try:
        emit(_run_json(store, cancel_job(store, run_id)))
    except InvalidInput as err:
        fail(str(err))


@runs_app.command("resume")
def runs_resume(
    run_id: int = typer.Argument(..., help="The failed or cancelled run to continue."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Continue a failed or cancelled run from its newest checkpoint, in the background (same run, same settings);
    follow it with `wmstudio runs show`."""
    from wmstudio.train.jobs import resume_job, run_checkpoints

    store = _store(db)
    try:
        run = resume_job(store, run_id)
    except InvalidInput as err:
        fail(str(err))
    emit({**_run_json(store, run), "from_checkpoint": run_checkpoints(run)[-1].name, "log": run.log_path})


def _world_model(env: str, model: str | None, url: str | None):
    """Who answers an episode's world-model calls: nobody in the simulator, a `serve-wm` server at `url` (its key
    from WMSTUDIO_API_KEY), else the model loaded here."""
    from wmstudio.model.backends import load_backend
    from wmstudio.model.remote_world_model import RemoteWorldModel
    from wmstudio.train.environments import SIMULATOR

    if env == SIMULATOR:
        return None
    if url:
        return RemoteWorldModel(url, os.environ.get("WMSTUDIO_API_KEY") or None)
    return load_backend(model or DEFAULT_MODEL)


def _trained_model_folder(model: str) -> Path:
    """The folder of `model` (a path or a shipped name); InvalidInput naming --model when train-wm did not write it."""
    from wmstudio.model.backends import resolve_model_path

    folder = Path(resolve_model_path(model))
    if not (folder / "config.json").exists():
        raise InvalidInput(Problem("--model", f"{folder} is not a model folder: give one that train-wm wrote"))
    return folder


@app.command("fit-outcome")
def fit_outcome(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder; its train split is fitted on."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The model folder the head is saved in."),
    rows: Optional[int] = typer.Option(None, "--rows", min=1, help="Fit on the first N training rows (all: none)."),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Fit a model's outcome head (status and error code from the call and the state) on a corpus and save it in
    the model folder: what `train-wm` does after training, for a model trained before."""
    from wmstudio.train.examples import read_corpus_split
    from wmstudio.train.outcome_fitting import fit_outcome_head

    try:
        folder = _trained_model_folder(model)
        fitted = fit_outcome_head(read_corpus_split(corpus, "train", rows), folder, seed=seed, corpus=str(corpus))
    except InvalidInput as err:
        fail(str(err))
    if fitted is None:
        fail(f"{corpus}: no training row names a simulated world (`meta`) and answers ok or error, so there is "
             "nothing to fit on: use a `wmstudio corpus` folder")
    emit({"model": str(folder), **fitted})


@app.command("keep-schemas")
def keep_schemas(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder the model was trained on; its train split."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The model folder the schemas are kept in."),
    rows: Optional[int] = typer.Option(None, "--rows", min=1, help="Read the first N training rows (all: none)."),
) -> None:
    """Keep the response schemas the corpus's tools were trained with beside a model (`trained_schemas.json`), so
    a world that leaves a tool's schema out still gets its skeleton: what `train-wm` does after training."""
    from wmstudio.train.examples import read_corpus_split
    from wmstudio.train.trained_schema_writing import write_trained_schemas

    try:
        folder = _trained_model_folder(model)
        fitted = write_trained_schemas(read_corpus_split(corpus, "train", rows), folder, corpus=str(corpus))
    except InvalidInput as err:
        fail(str(err))
    if fitted is None:
        fail(f"{corpus}: no training row names a simulated world (`meta`) whose tool has a response schema, so "
             "there is none to keep: use a `wmstudio corpus` folder")
    emit({"model": str(folder), **fitted})


@app.command("eval-wm")
def eval_wm(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder; its test split is held out."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The masked diffusion model."),
    ar: Optional[str] = typer.Option(DEFAULT_AR_MODEL, "--ar", help="AR baseline ('' for none)."),
    rows: int = typer.Option(200, "--rows", min=1, help="Held-out rows to generate for."),
    diversity_calls: int = typer.Option(8, "--diversity-calls", min=0, help="Calls sampled K times for diversity."),
    samples: int = typer.Option(8, "--samples", min=2, max=8, help="K: samples per call at temperature 1."),
    split: str = typer.Option("test", "--split"),
    seed: int = typer.Option(0, "--seed"),
    grounding: str = typer.Option("none", "--grounding",
                                  help="What every prompt may hold beyond the five parts: none (the model tracks the "
                                       "state) or oracle (the simulator's replayed state and retrieval)."),
    write: bool = typer.Option(False, "--write", help="Save quality.json in the model folder, update its card."),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON report."),
    chat_length: int = typer.Option(DEFAULT_CHAT_LENGTH, "--chat-length", min=8, max=1024,
                                    help="Response tokens per row on a chat-format corpus (no schema to size it)."),
) -> None:
    """Measure a world model on held-out rows: field accuracy by kind beside baselines that can win (echo, a status
    rule, the nearest training response, constants), with each head switched off, checks, pinned-anchor flips, free
    mode, whether it reads its prompt, and diversity. A corpus of chat rows without
    `meta` (another project's) is scored by the Patronus protocol: exact, JSON-semantic and ROUGE-L match."""
    from wmstudio.model.backends import resolve_model_path
    from wmstudio.train.chat_scoring import score_chat_corpus
    from wmstudio.train.evaluation import evaluate_world_model, write_quality
    from wmstudio.train.examples import read_corpus_split

    def progress(done: int, total: int) -> None:
        if not as_json:
            typer.echo(f"\r{done}/{total} rows", err=True, nl=done == total)

    try:
        if not any(row.meta for row in read_corpus_split(corpus, split)):
            chat = score_chat_corpus(model, ar or None, corpus, rows=rows, split=split, seed=seed,
                                     length=chat_length, progress=progress)
            if not as_json:
                typer.echo(chat.render(), err=True)
                for error in chat.errors[:10]:
                    typer.echo(f"warning: {error}", err=True)
            emit(chat.to_json())
            return
        report = evaluate_world_model(model, ar or None, corpus, rows=rows, diversity_calls=diversity_calls,
                                      samples=samples, split=split, seed=seed, grounding=grounding,
                                      progress=progress)
    except InvalidInput as err:
        fail(str(err))
    if write:
        for folder in [model, ar] if ar else [model]:
            write_quality(report, Path(resolve_model_path(folder)))
    if not as_json:
        typer.echo(report.render(), err=True)
        for error in report.errors[:10]:
            typer.echo(f"warning: {error}", err=True)
    emit(report.to_json())


@app.command("evaluate")
def evaluate_cmd(
    policy: str = typer.Option(..., "--policy", help="A scripted policy (expert, noisy or random) or a trained "
                                                     "policy's folder (train-agent, train-grpo)."),
    curriculum: str = typer.Option("demo", "--curriculum", help="The scenarios: demo (the five simulated worlds) "
                                                                 "or a saved curriculum with scenarios."),
    split: str = typer.Option("heldout", "--split", help="train or heldout."),
    env: str = typer.Option("world-model", "--env", help="Where the estimate's calls are answered: world-model, "
                                                         "simulator or hybrid."),
    episodes: Optional[int] = typer.Option(None, "--episodes", min=1, help="Scenarios to play (default: all)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The world model."),
    world_model_url: Optional[str] = typer.Option(None, "--world-model-url", help="Send the world model's calls to "
                                                  "a `wmstudio serve-wm` at this address instead (its key from "
                                                  "WMSTUDIO_API_KEY)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the noisy and random policies."),
    grounding: str = typer.Option("none", "--grounding", help="What the world model's prompts may hold: none (it "
                                  "tracks the state from the episode) or oracle (the simulator's state)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON report."),
) -> None:
    """Estimate a policy's success rate from world-model rollouts alone (with a 95% interval), beside the ground
    truth from the simulators on the same scenarios (off-policy evaluation)."""
    from wmstudio.model.remote_world_model import WorldModelUnavailable
    from wmstudio.train.curriculum_scenarios import curriculum_scenarios
    from wmstudio.train.environments import MODES
    from wmstudio.train.off_policy import evaluate_policy, report
    from wmstudio.train.scenarios import split_of
    from wmstudio.train.scripted_policies import scripted_policy

    def progress(done: int, total: int) -> None:
        if not as_json:
            typer.echo(f"\r{done}/{total} episodes", err=True, nl=done == total)

    try:
        if env not in MODES:
            fail(f"--env {env!r} is not an environment: use {', '.join(MODES)}")
        if Path(policy).is_dir():  # a trained policy (train-agent or train-grpo), played greedily
            from wmstudio.train.agent_policy import load_policy

            chosen = load_policy(policy).act
        else:
            chosen = scripted_policy(policy, seed)
        scenarios = split_of(curriculum_scenarios(_store(db), curriculum), split)[:episodes]
        backend = _world_model(env, model, world_model_url)
        estimate = evaluate_policy(chosen, scenarios, backend, env, progress, grounding)
    except (InvalidInput, WorldModelUnavailable) as err:
        fail(str(err))
    data = report(policy, curriculum, split, estimate)
    if not as_json:
        typer.echo(f"{policy} on {curriculum}/{split} in {env}: {data['estimate']:.1%} "
                   f"[{data['ci95'][0]:.1%}, {data['ci95'][1]:.1%}], ground truth {data['ground_truth']:.1%}", err=True)
    emit(data)


# --- generation and the denoising benchmark (engine) ---------------------------------------------------

bench_app = typer.Typer(help="Measure how fast the engine runs on this machine.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

SAMPLER_HELP = "(the sampler's own help)"  # replaced by SamplerSettings.help(name) when the help is shown


class SamplerOptionsCommand(TyperCommand):
    """A command whose sampler options show SamplerSettings' own help and defaults, read only when its --help is
    asked for: the sampler imports torch, which `wmstudio --help` and refused input never need."""

    def format_help(self, ctx, formatter) -> None:
        from wmstudio.model.sampler import SamplerSettings

        defaults = SamplerSettings()
        for param in self.params:
            if getattr(param, "help", None) == SAMPLER_HELP:
                param.help = SamplerSettings.help(param.name)
                param.default = getattr(defaults, param.name)  # shown only: --help ends the command here
        super().format_help(ctx, formatter)


@app.command("generate", cls=SamplerOptionsCommand)
def generate_cmd(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    anchor: list[str] = typer.Option([], "--anchor", help='Pinned field, PATH=VALUE (JSON value): status="error".'),
    model: Optional[str] = typer.Option(None, "--model", help="Model folder or hub id (default: the shipped MDLM)."),
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    steps: Optional[int] = typer.Option(None, "--steps", help=SAMPLER_HELP),
    strategy: str = typer.Option("low_confidence", "--strategy", help=SAMPLER_HELP),
    threshold: Optional[float] = typer.Option(None, "--threshold", help=SAMPLER_HELP),
    no_threshold: bool = typer.Option(False, "--no-threshold", help="Linear schedule only (LLaDA's)."),
    block: Optional[int] = typer.Option(None, "--block", help=SAMPLER_HELP),
    temperature: float = typer.Option(0.0, "--temperature", help=SAMPLER_HELP),
    repetition_penalty: float = typer.Option(1.0, "--repetition-penalty", help=SAMPLER_HELP),
    samples: int = typer.Option(1, "--samples", help=SAMPLER_HELP),
    seed: int = typer.Option(0, "--seed", help=SAMPLER_HELP),
    free: bool = typer.Option(False, "--free", help=SAMPLER_HELP),
    free_length: int = typer.Option(64, "--free-length", help=SAMPLER_HELP),
    repair: bool = typer.Option(False, "--repair", help=SAMPLER_HELP),
    outcome_head: bool = typer.Option(True, "--outcome-head/--no-outcome-head", help=SAMPLER_HELP),
    copy_head: bool = typer.Option(True, "--copy-head/--no-copy-head", help=SAMPLER_HELP),
    grounding: str = typer.Option("none", "--grounding", help=SAMPLER_HELP),
    retrieval: bool = typer.Option(True, "--retrieval/--no-retrieval", help=SAMPLER_HELP),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow LLaDA/Dream model code."),
    approximate_cache: bool = typer.Option(
        False, "--approximate-cache", help="Cache the prompt of a fully bidirectional model (inexact, faster)."
    ),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or mps (default: the best there is)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the live view."),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP + " Its anchors join --anchor (which "
                                         "wins on the same field), its directives the world's."),
) -> None:
    """Generate the response to a call with the world model: a live view of the denoising, or --json."""
    from wmstudio.world.anchors import parse_anchors

    try:  # the input first: a mistake in it is named before CEL (a second), torch and the model (seconds) load
        anchors = parse_anchors(anchor)
    except InvalidInput as err:
        fail(str(err))
    from wmstudio.world.spec import Call

    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        if preset is not None:
            from wmstudio.world.presets import apply_preset

            spec, anchors = apply_preset(preset, spec, the_call, anchors)
            typer.echo(f"preset {preset}: anchors {', '.join(map(str, anchors)) or 'none'}; directives "
                       f"{'; '.join(spec.directives)}", err=True)
        steps_before = _read_history(history)
    except InvalidInput as err:
        fail(str(err))
    schedule = {"threshold": None} if no_threshold else {} if threshold is None else {"threshold": threshold}
    settings = _sampler_settings(steps=steps, strategy=strategy, **schedule, block=block, temperature=temperature,
                                 repetition_penalty=repetition_penalty, samples=samples, seed=seed, free=free,
                                 free_length=free_length, repair=repair, outcome_head=outcome_head,
                                 copy_head=copy_head, grounding=grounding, retrieval=retrieval)
    from wmstudio.model.backends import load_backend  # torch and transformers: only once the input is read
    from wmstudio.model.generation import Generation, generate_stream

    try:
        backend = load_backend(model or DEFAULT_MODEL, trust_remote_code=trust_remote_code, device=device,
                               approximate_cache=approximate_cache)
        stream = generate_stream(backend, spec, the_call, anchors, steps_before, settings)
        result = _run_generation(stream, live=not as_json)
    except InvalidInput as err:
        fail(str(err))
    except OSError as err:  # unreadable weights or tokenizer files
        fail(f"cannot load the model: {err}")
    assert isinstance(result, Generation)
    if as_json:
        emit({**result.to_json(), "directives": list(spec.directives)})
        return
    for k, sample in enumerate(result.samples):
        verdict = "ok" if sample.checks.ok else "; ".join(_check_problems(sample.checks)) or "failed"
        typer.echo(f"--- sample {k + 1} ({sample.steps} steps): {verdict}")
        typer.echo(sample.response)
    if result.outcome is not None:
        typer.echo(f"outcome head {result.outcome_summary()} (written into its slots; --no-outcome-head lets the "
                   "canvas decide)", err=True)
    if result.sketch is not None:
        used = "its skeleton was laid out from it" if result.schema_from == "sketch" else "not a schema: free canvas"
        typer.echo(f"the tool has no response schema; the model sketched it as {result.sketch.text} ({used})", err=True)
    elif result.schema_from == "history":
        typer.echo("the tool has no response schema; its skeleton comes from its earlier answers in the history",
                   err=True)
    elif result.schema_from == "training":
        typer.echo("the tool has no response schema; its skeleton is the one the model was trained with for it",
                   err=True)
    typer.echo(f"{result.model}, {result.mode} canvas, grounding {result.grounding}, {result.elapsed_ms:.0f} ms",
               err=True)


def _sampler_settings(**values):
    """SamplerSettings from command-line options; a bad value exits 2 naming its option (`--steps ...`)."""
    from wmstudio.model.sampler import SamplerSettings

    try:
        return SamplerSettings(**values)
    except InvalidInput as err:
        fail("\n".join(f"--{p.path.replace('_', '-')} {p.message}" for p in err.problems))


def _run_generation(stream, live: bool):
    """Drain `stream`; with `live`, redraw the first sample's canvas in the terminal at every frame."""
    from wmstudio.model.generation import Generation

    if not live:
        return next(item for item in stream if isinstance(item, Generation))
    from rich.console import Console
    from rich.live import Live

    canvas = next(stream)
    if isinstance(canvas, Generation):  # the AR baseline has no canvas and no frames
        return canvas
    with Live(_canvas_text(canvas), console=Console(stderr=True), refresh_per_second=20) as view:
        for item in stream:
            if isinstance(item, Generation):
                return item
            view.update(_frame_text(canvas, item))
    raise InvalidInput("generation ended without a result")


def _canvas_text(canvas, tokens=None, fresh=frozenset()):
    """A canvas in the terminal: anchors plain, masked slots a dim block, pads a dim dot, new slots highlighted."""
    from rich.text import Text

    text = Text()
    for position, token in enumerate(tokens if tokens is not None else canvas.tokens):
        if canvas.span_of[position] < 0:
            text.append(canvas.piece(token))
        elif token == canvas.mask_id:
            text.append("\u2591", style="dim")
        elif token == canvas.pad_id:
            text.append("\u00b7", style="dim")
        else:
            text.append(canvas.piece(token), style="bold black on green" if position in fresh else "bold")
    return text


def _frame_text(canvas, frame):
    """Sample 1 of a frame, with a line saying the step and how many slots it unmasked."""
    text = _canvas_text(canvas, frame.tokens[0], set(frame.unmasked[0]))
    text.append(f"\n step {frame.step + 1}: {len(frame.unmasked[0])} unmasked", style="dim")
    return text


def _check_problems(report) -> list[str]:
    problems = [] if report.json_valid else ["not JSON"]
    problems += report.schema_errors + report.anchor_violations
    problems += [f"rule: {v['rule']} ({v['message']})" for v in report.rule_violations]
    return problems + report.message_strays


@bench_app.command("denoise")
def bench_denoise_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: the best there is)."),
    preset: str = typer.Option("default", "--preset", help="default (shipped model) or llada-8b (random, GPU)."),
    repeats: int = typer.Option(5, "--repeats", min=1, max=100,
                                help="Timed runs per configuration, each on another prompt."),
    model: Optional[str] = typer.Option(None, "--model", help="Time this wmstudio MDLM instead of the default."),
    workload: Optional[str] = typer.Option(None, "--workload", help="random (random prompts: the worst case) or "
                                                                    "real (held-out calls of the demo worlds); "
                                                                    "default both."),
) -> None:
    """Time our sampler against LLaDA's reference loop for canvases of 32/64/128 and prompts of ~400/1024."""
    from wmstudio.model.bench import WORKLOADS, bench_denoise

    try:
        report = bench_denoise(preset=preset, device=device, repeats=repeats, model=model,
                               workloads=(workload,) if workload else WORKLOADS,
                               progress=None if as_json else lambda line: typer.echo(line, err=True))
    except InvalidInput as err:
        fail(str(err))
    if as_json:
        emit(report.to_json())
        return
    typer.echo(f"{report.model} on {report.device} ({report.dtype}, {report.threads} threads), "
               f"median of {report.repeats} prompts")
    typer.echo(f"{'workload':<8} {'calls':>5} {'canvas':>6} {'prompt':>6} {'ms':>9} {'ref ms':>9} {'speedup':>7} "
               f"{'steps':>5} {'ref steps':>9} {'tok/s':>8} {'cache-only ms':>13}")
    for r in report.results:
        typer.echo(f"{r.workload:<8} {r.calls:>5} {r.canvas:>6} {r.prompt_tokens:>6} {r.median_ms:>9.1f} "
                   f"{r.reference_median_ms:>9.1f} "
                   f"{r.speedup:>6.1f}x {r.steps:>5} {r.reference_steps:>9} {r.tokens_per_s:>8.0f} "
                   f"{r.cache_only_median_ms:>13.1f}")
    for line in report.skipped:
        typer.echo(f"skipped: {line}")


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
