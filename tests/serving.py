"""What the studio's HTTP and browser tests share: a free loopback port, how to start Debian's Chromium, and
calls and inputs for the Simulate API (the concurrency test and benchmark).

On the path through `pythonpath = ["tests"]` in pyproject.toml."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

CHROMIUM = "/usr/bin/chromium"  # Debian's package, installed by .ci/run
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # root in a container, and no network to reach


def open_rollout(page, rollout_id: int, header_text: str, tries: int = 3) -> None:
    """Open a rollout by id in the Rollouts tab and wait for its header. A fill made while the page's load events are
    still answering can be lost (Gradio sets the inputs again when they return), so the fill is made again when the
    header does not follow."""
    from playwright.sync_api import expect

    for attempt in range(tries):
        page.locator("#rollout-id input").fill(str(rollout_id))
        page.get_by_role("button", name="Open", exact=True).click()
        try:
            expect(page.locator("#rollout-header")).to_contain_text(header_text, timeout=10_000)
            return
        except AssertionError:
            if attempt == tries - 1:
                raise


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


SIMULATE_CALLS = [  # (world, tool, arguments): one call of each demo world that the simulators answer
    ("retail", "get_order", '{"order_id": "ORD-22930"}'),
    ("retail", "refund_order", '{"order_id": "ORD-22930", "amount_cents": 500}'),
    ("airline", "search_flights", '{"origin": "DEN", "destination": "PHX", "date": "2025-08-09"}'),
    ("filesystem", "ls", '{"path": "/home"}'),
    ("records", "search_records", '{"city": "Lisbon"}'),
]


def simulate_inputs(world_id: int, tool: str, arguments: str, seed: int) -> list:
    """The Simulate tab's Run event's inputs (`/simulate_run`, what the page sends) for a run with the default
    sampler and no anchor pinned; scripts call the API's `/simulate` by name instead (ui/api.py)."""
    from wmstudio.model.denoising.sampler_settings import SETTING_NAMES
    from wmstudio.ui.forms import MASKED
    from wmstudio.ui.simulate_tab import ANCHOR_SLOTS

    settings = {"steps": 8, "strategy": "low_confidence", "threshold": 0.9, "block": 0, "temperature": 0.7,
                "repetition_penalty": 1.0, "samples": 1, "seed": seed, "free": False, "free_length": 64,
                "repair": False, "outcome_head": True, "copy_head": True, "record_copy": True, "rule_outcomes": True,
                "rule_fields": True, "grounding": "none", "retrieval": True}
    return [world_id, tool, arguments, "", *(settings[name] for name in SETTING_NAMES), *[MASKED] * ANCHOR_SLOTS, ""]


def wait_for_http(url: str, seconds: float = 120, process=None) -> None:
    """Return once GET `url` answers 200; fail after `seconds`, or as soon as `process` (a Popen) has exited."""
    import time

    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the server exited with code {process.returncode} before answering {url}")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{url} did not answer within {seconds:.0f} s")


def read_reply(conn: socket.socket) -> tuple[int, str]:
    """(status, body) of one HTTP/1.1 answer with a Content-Length, read from `conn`."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    length = next(int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:"))
    while len(body) < length:
        body += conn.recv(65536)
    return int(lines[0].split()[1]), body[:length].decode()


PLACEHOLDER = None  # a tab that stands where the studio has another one, so the tab under test is not the first


@contextmanager
def served_tabs(ctx, tabs: dict, head: str | None = None) -> Iterator[str]:
    """The studio's tabs named in `tabs` (name -> its builder `build(ctx, app)`, or PLACEHOLDER), served on a free
    loopback port over `ctx`; yields the page's URL and closes the server afterwards. The one way the browser
    tests open a studio of some of its tabs."""
    import gradio as gr

    with gr.Blocks(title="World Model Studio") as app:
        for name, build in tabs.items():
            with gr.Tab(name):
                if build is PLACEHOLDER:
                    gr.Markdown(f"The {name} tab stands here in the studio.")
                else:
                    build(ctx, app)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True,
                           head=head)
    try:
        yield url
    finally:
        app.close()


@contextmanager
def chromium_page(url: str, viewport: dict | None = None, ready=None) -> Iterator:
    """A headless Chromium tab on `url` (1400 x 1000 unless `viewport`), once `ready(tab)` has returned; the browser
    is closed afterwards."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tab = browser.new_page(viewport=viewport or {"width": 1400, "height": 1000})
            tab.goto(url)
            if ready is not None:
                ready(tab)
            yield tab
        finally:
            browser.close()
