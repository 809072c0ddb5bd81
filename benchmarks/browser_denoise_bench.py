"""Browser benchmark of the Simulate tab: from the Run click to the first frame drawn and to the last one.

Launches the studio on the default model (or --model), opens it in headless Chromium, runs a skeleton denoise of
about 64 masked tokens N times and prints the median times (targets: first frame 0.5 s, whole denoise 2 s).
Run: `python benchmarks/browser_denoise_bench.py [--runs 10] [--model PATH] [--tool NAME] [--threads 1]`."""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import gradio as gr
import torch
from playwright.sync_api import expect, sync_playwright

from wmstudio.locations import DEFAULT_MODEL, DEMO_WORLDS_DIR
from wmstudio.model.generation.generation import prepare_canvas
from wmstudio.store import list_worlds, save_world_version
from wmstudio.studio.context import open_context
from wmstudio.ui.simulate_tab import build_simulate_tab
from wmstudio.ui.studio import build_studio
from wmstudio.world.spec import Call, load_world

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
# Timestamps (performance.now) of the Run click and of each canvas the page paints, in window.__bench; a run's
# canvases start with the empty one (data-step -1), so the previous run's last canvas is never counted.
WATCH = """() => {
  window.__bench = {click: null, frames: []};
  document.querySelector('#simulate-run').addEventListener('click', () => {
    window.__bench = {click: performance.now(), frames: []};
  }, true);
  const root = document.querySelector('#simulate-canvas');
  new MutationObserver(() => {
    const canvas = root.querySelector('.wm-canvas');
    if (!canvas || window.__bench.click === null) return;
    const entry = {step: +canvas.dataset.step, done: canvas.dataset.done === '1', masked: +canvas.dataset.masked};
    const frames = window.__bench.frames;
    if (!frames.length && entry.step !== -1) return;  // the previous run's canvas, until this run's empty one
    const last = frames[frames.length - 1];
    if (last && last.step === entry.step && last.done === entry.done) return;
    frames.push(entry);
    requestAnimationFrame(() => { entry.painted = performance.now(); });
  }).observe(root, {childList: true, subtree: true, attributes: true});
}"""


def pick_tool(backend, world, target: int) -> tuple[str, int, int]:
    """The world's tool whose skeleton canvas has the number of masked slots closest to `target`."""
    sizes = []
    for tool in world.tools:
        if tool.response is None:
            continue
        canvas = prepare_canvas(backend, world, Call(tool.name, {}), [])
        sizes.append((abs(len(canvas.masked_positions) - target), tool.name, len(canvas.masked_positions), len(canvas)))
    _, name, masked, length = min(sizes)
    return name, masked, length


def serve(ctx) -> tuple[gr.Blocks, str, str]:
    """The studio if it already has the Simulate tab, else the Simulate tab alone; returns (app, url, which)."""
    app = build_studio(ctx)
    which = "the studio"
    if not any(getattr(block, "elem_id", None) == "simulate-run" for block in app.blocks.values()):
        with gr.Blocks(title="World Model Studio") as app, gr.Tab("Simulate"):
            build_simulate_tab(ctx, app)
        which = "the Simulate tab alone (build_studio does not include it yet)"
    app.queue(default_concurrency_limit=4)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    return app, url, which


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="timed runs (after one warm-up run)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="world model folder (default: the shipped one)")
    parser.add_argument("--world", default="retail", help="demo world to run in")
    parser.add_argument("--tool", default=None, help="tool to call (default: the one with ~64 masked slots)")
    parser.add_argument("--masked", type=int, default=64, help="masked slots the default tool should have")
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads for the server (default: torch's own choice); 1 helps on a busy machine")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    home = Path(tempfile.mkdtemp(prefix="wmstudio-bench-"))
    ctx = open_context(db=home / "studio.db", model=args.model, ar_model=None)
    for path in sorted(DEMO_WORLDS_DIR.glob("*.json")):
        save_world_version(ctx.store, load_world(path))
    started = time.perf_counter()
    backend = ctx.backend()
    print(f"model {backend.name} loaded in {time.perf_counter() - started:.1f} s on {backend.device}, "
          f"{torch.get_num_threads()} torch thread(s), load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    world_row = next(w.latest for w in list_worlds(ctx.store) if w.name == args.world)
    world = world_row.spec()
    if args.tool:
        canvas = prepare_canvas(backend, world, Call(args.tool, {}), [])
        tool, masked, length = args.tool, len(canvas.masked_positions), len(canvas)
    else:
        tool, masked, length = pick_tool(backend, world, args.masked)
    print(f"world {world.name}, tool {tool}: skeleton canvas of {length} tokens, {masked} of them masked")

    app, url, which = serve(ctx)
    print(f"serving {which} at {url}")
    firsts, lasts, dones, frame_counts = [], [], [], []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True,
                                                 args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            tab = page.get_by_role("tab", name="Simulate")
            tab.click()
            world_input = page.locator("#simulate-world input")
            expect(world_input).not_to_have_value("", timeout=30_000)
            label = f"{world.name} (v{world_row.version})"
            if world_input.input_value() != label:
                world_input.click()
                page.get_by_role("option", name=label, exact=True).click()
            expect(page.locator("#simulate-tool input")).not_to_have_value("", timeout=30_000)  # the world's tools
            page.locator("#simulate-tool input").click()
            page.get_by_role("option", name=tool, exact=True).click()
            expect(page.locator("#simulate-tool input")).to_have_value(tool)
            page.wait_for_timeout(1000)  # let the forms settle
            page.evaluate(WATCH)
            for run in range(args.runs + 1):
                page.locator("#simulate-run").click()
                page.wait_for_function("window.__bench.frames.some(f => f.done && f.painted)", timeout=120_000)
                page.wait_for_timeout(100)
                bench = page.evaluate("window.__bench")
                frames = [f for f in bench["frames"] if "painted" in f]
                first = next(f for f in frames if f["step"] >= 0)
                last = next(f for f in frames if f["step"] >= 0 and f["masked"] == 0)
                done = next(f for f in frames if f["done"])
                times = [(f["painted"] - bench["click"]) / 1000 for f in (first, last, done)]
                count = len({f["step"] for f in frames if f["step"] >= 0})
                kind = "warm-up" if run == 0 else f"run {run}"
                print(f"{kind:>8}: first frame {times[0]:.3f} s, last frame {times[1]:.3f} s, "
                      f"report {times[2]:.3f} s, {count} frames drawn")
                if run:
                    firsts.append(times[0])
                    lasts.append(times[1])
                    dones.append(times[2])
                    frame_counts.append(count)
            browser.close()
    finally:
        app.close()
    print(f"\nmedian over {args.runs} runs ({masked}-token skeleton denoise, {tool}; {length}-token canvas; load "
          f"average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end):")
    print(f"  Run click -> first frame drawn: {statistics.median(firsts):.3f} s (target 0.5 s)")
    print(f"  Run click -> last frame drawn:  {statistics.median(lasts):.3f} s (target 2 s)")
    print(f"  Run click -> report drawn:      {statistics.median(dones):.3f} s")
    print(f"  frames drawn per run:           {statistics.median(frame_counts):.0f}")


if __name__ == "__main__":
    main()
