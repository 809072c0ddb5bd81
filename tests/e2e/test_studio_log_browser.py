"""The studio's own log stays clean while a person loads the page and flips through worlds: `wmstudio serve` runs
as a real process writing its log to a file, headless Chromium loads the page 10 times and switches the World tab
between the demo worlds 20 times, and the log then holds no traceback.

Each switch fills the World tab's fields, and every field change writes the download file of what is shown; those
writes ran in parallel and shared one temporary file name (FileNotFoundError in about one page load in three)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from playwright.sync_api import expect
from serving import chromium_page, free_port, wait_for_http

from wmstudio.store.seeding import demo_worlds

LOADS, SWITCHES = 10, 20


@pytest.fixture
def served(tmp_path):
    """`wmstudio serve` on a fresh database; yields (url, log file). Stopped (SIGINT, as Ctrl-C) afterwards."""
    port, log = free_port(), tmp_path / "app.log"
    env = {**os.environ, "WMSTUDIO_HOME": str(tmp_path / "home"), "OMP_NUM_THREADS": "1"}
    env.pop("SPACE_ID", None)
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "serve", "--port", str(port), "--db",
                                   str(tmp_path / "studio.db")], stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=tmp_path)
    url = f"http://127.0.0.1:{port}/"
    try:
        wait_for_http(url, process=server)
        yield url, log
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_page_loads_and_world_switches_leave_no_traceback_in_the_log(served):
    url, log = served
    names = sorted(world.name for world in demo_worlds())
    status = "#world-status"

    def loaded(page) -> None:
        expect(page.locator(status)).to_contain_text(f"Loaded {names[0]} v1", timeout=60_000)

    with chromium_page(url, ready=loaded) as page:
        browser = page.context.browser
        for _ in range(LOADS - 1):  # a fresh page each time, as a person opening the studio again
            page.close()
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            loaded(page)
        for number in range(SWITCHES):
            name = names[(number + 1) % len(names)]
            page.locator("#world-picker input").click()
            page.get_by_role("option", name=name, exact=True).click()
            expect(page.locator(status)).to_contain_text(f"Loaded {name} v1", timeout=30_000)
            expect(page.locator("#world-task textarea")).not_to_have_value("", timeout=10_000)
        time.sleep(3)  # the last switch's download-file writes run after the fields are shown
    text = log.read_text(encoding="utf-8", errors="replace")
    assert f"World Model Studio running at {url}" in text  # the log is the server's
    assert "share=True" not in text  # Gradio's hint about public links misled a local user
    assert "Traceback" not in text and "Error" not in text, text[-4000:]
