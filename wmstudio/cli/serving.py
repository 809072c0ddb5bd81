"""Serving: `serve` (the studio in a browser, the world-model API beside it), `serve-wm` (the world model over
HTTP for external trainers) and `space build` (a Hugging Face Space folder)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wmstudio.cli.common import emit, fail, load_world
from wmstudio.locations import DEFAULT_AR_MODEL

commands = typer.Typer()
space_app = typer.Typer(help="The Hugging Face Space: assemble a deployable folder.", no_args_is_help=True)


@commands.command()
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

    launch(host=host, port=port, db=db, model=model, ar_model=ar_model or DEFAULT_AR_MODEL,
           trust_remote_code=trust_remote_code, users=users, overlap=overlap, insecure_no_auth=insecure_no_auth,
           on_started=lambda studio, ctx: _mount_world_api(studio, ctx, host, api_key))


def _mount_world_api(studio, ctx, host: str, api_key: Optional[str]) -> None:
    """The world-model HTTP API beside the studio, on the studio's loaded model (not on an open host without a key)."""
    from wmstudio.network import is_loopback
    from wmstudio.serve.http_api import mount_beside_studio

    if not is_loopback(host) and not api_key:
        typer.echo(f"note: the world-model API (/v1/...) is not served on {host} without --api-key", err=True)
        return
    mount_beside_studio(studio.app, ctx.backend(), ctx.store, api_key, host)


@commands.command("serve-wm")
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
    from wmstudio.model.network.sources import check_model_source

    check_model_source(model)  # before the model libraries load (seconds): a wrong path is refused at once
    from wmstudio.model.serving.backends import load_backend
    from wmstudio.serve.server import refuse_open_binding, run
    from wmstudio.serve.service import WorldModelService
    from wmstudio.studio.world_step import resolve_world
    from wmstudio.studio.worlds import open_studio_store

    refuse_open_binding(host, api_key)
    store = open_studio_store(db, seed=True)
    default_world = None
    if world:
        default_world = load_world(Path(world)) if Path(world).is_file() else resolve_world(world, store)
    backend = load_backend(model, trust_remote_code=trust_remote_code)
    if batching not in ("auto", "on", "off"):
        fail(f"--batching {batching!r}: use on, off or auto")
    service = WorldModelService.create(backend, batching={"auto": None, "on": True, "off": False}[batching],
                                       store=store, world=default_world, api_key=api_key,
                                       max_body_bytes=int(max_body_mb * 1_000_000))
    typer.echo(f"serving {backend.name} on http://{host}:{port} (batching "
               f"{'on' if service.batcher else 'off'})", err=True)
    run(service, host=host, port=port)


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

    built = build_space(out, hardware=hardware, models=model_repo, force=force)
    emit({"folder": str(built.folder), "front_matter": built.front_matter, "requirements": built.requirements})
