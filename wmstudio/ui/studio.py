"""The studio page: assembles the tabs into one Gradio Blocks app and launches it.

`build_studio()` returns the Blocks (tests launch it themselves); `launch()` is what `python app.py` runs."""

from __future__ import annotations

from pathlib import Path

import gradio as gr

from wmstudio.ui.world_tab import build_world_tab, load_fields


def build_studio() -> gr.Blocks:
    """The whole studio as a Blocks app, with the first demo world loaded on open."""
    with gr.Blocks(title="World Model Studio") as studio:
        gr.Markdown("# World Model Studio\nAuthor steered rollouts for a masked diffusion text world model.")
        with gr.Tab("World"):
            picker, fields, status = build_world_tab()
        studio.load(load_fields, picker, fields + [status], api_visibility="private")
    return studio


def launch(host: str = "127.0.0.1", port: int = 7860, db: Path | None = None, **kwargs) -> None:
    """Start the studio server and block (`prevent_thread_lock=True` in kwargs returns at once)."""
    studio = build_studio()
    studio.queue(default_concurrency_limit=4)
    studio.launch(server_name=host, server_port=port, **kwargs)
