"""The studio page: opens the store and models, assembles the tabs into one Gradio app and serves it.

`build_studio(ctx)` returns the Blocks (tests launch it themselves); `launch()` is what `python app.py` and
`wmstudio serve` run."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import gradio as gr
import torch

from wmstudio.locations import DEFAULT_AR_MODEL
from wmstudio.problems import InvalidInput
from wmstudio.serve.deadlines import head_deadlines_for_gradio
from wmstudio.serve.site_guard import server_middleware
from wmstudio.studio.context import DEFAULT_OVERLAP, StudioContext, open_context
from wmstudio.studio.memory import limit_malloc_arenas, settle_for_serving
from wmstudio.ui.access import exposure, single_user
from wmstudio.ui.annotate_tab import ANNOTATE_SHORTCUTS_HEAD, build_annotate_tab
from wmstudio.ui.api import build_api, hide_tab_events
from wmstudio.ui.rollouts_tab import build_rollouts_tab
from wmstudio.ui.simulate_tab import build_simulate_tab
from wmstudio.ui.train_tab import build_train_tab
from wmstudio.ui.world_tab import build_world_tab

TITLE = "World Model Studio"
MAX_UPLOAD_BYTES = 1_000_000_000  # the largest dataset import; world and tool files have lower limits of their own


def build_studio(ctx: StudioContext, single_user_studio: bool | None = None) -> gr.Blocks:
    """The whole studio as a Blocks app; `single_user_studio` as in `build_rollouts_tab` (who may push with
    the server's HF_TOKEN)."""
    with gr.Blocks(title=TITLE) as studio:
        gr.Markdown(f"# {TITLE}\nAuthor steered rollouts for a masked diffusion text world model.")
        with gr.Tab("World", id="world"):
            build_world_tab(ctx, studio)
        with gr.Tab("Simulate", id="simulate"):
            build_simulate_tab(ctx, studio)
        with gr.Tab("Rollouts", id="rollouts"):
            build_rollouts_tab(ctx, studio, single_user_studio)
        with gr.Tab("Annotate", id="annotate"):
            build_annotate_tab(ctx, studio)
        with gr.Tab("Train", id="train"):
            build_train_tab(ctx, studio)
        build_api(ctx)  # the named API for scripts (gradio_client); view_api lists it alone
    hide_tab_events(studio)
    return studio


def launch(host: str = "127.0.0.1", port: int = 7860, db: str | Path | None = None, model: str | None = None,
           ar_model: str | None = DEFAULT_AR_MODEL, trust_remote_code: bool = False,
           users: dict[str, str] | None = None, overlap: int = DEFAULT_OVERLAP, insecure_no_auth: bool = False,
           on_started: Callable[[gr.Blocks, StudioContext], None] | None = None, **launch_kwargs) -> gr.Blocks:
    """Open the context, load the world model once, and serve the studio (blocks unless prevent_thread_lock).

    A host other than loopback needs `users` (or a Space's login) or `insecure_no_auth` (InvalidInput otherwise).
    Torch gets half the cores (one on a 2-core machine): the web server and the other requests need the rest,
    and on a loaded 2-core machine one thread drew a 64-token denoise 5x faster than two. `on_started` sees the
    running app and its context before the call blocks (the CLI mounts the world-model HTTP API there)."""
    refusal = exposure(host, dict(users or {}), insecure_no_auth, port).refusal
    if refusal is not None:
        raise InvalidInput(refusal)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    limit_malloc_arenas()
    ctx = open_context(db, model, ar_model, trust_remote_code, users, overlap)
    ctx.backend()  # load now so the first Run does not wait for it
    studio = build_studio(ctx, single_user(host, ctx.users))
    settle_for_serving()
    studio.queue(default_concurrency_limit=4)
    auth = list(ctx.users.items()) or None
    launch_kwargs.setdefault("head", ANNOTATE_SHORTCUTS_HEAD)
    launch_kwargs.setdefault("max_file_size", MAX_UPLOAD_BYTES)
    app_kwargs = dict(launch_kwargs.pop("app_kwargs", None) or {})  # Host and Origin checked before Gradio's routes
    app_kwargs["middleware"] = [*server_middleware(host), *app_kwargs.get("middleware", [])]
    block = not launch_kwargs.pop("prevent_thread_lock", False)
    quiet = launch_kwargs.pop("quiet", False)
    with head_deadlines_for_gradio():  # a stalled request head is closed, as on serve-wm
        studio.launch(server_name=host, server_port=port, auth=auth, prevent_thread_lock=True,
                      app_kwargs=app_kwargs, quiet=True, **launch_kwargs)  # Gradio's lines suggest share=True: not here
    if not quiet:
        print(f"World Model Studio running at {studio.local_url} (Ctrl-C to stop)", flush=True)
    if on_started is not None:
        on_started(studio, ctx)
    if block:
        studio.block_thread()
    return studio
