"""Take docs/simulate.png: the Simulate tab after a run, on the shipped world model, in headless Chromium.

    python docs/screenshot.py [--out docs/simulate.png]

Starts `wmstudio serve` on a fresh database, opens Simulate, asks the retail world for a refund with `status` pinned
to "error", runs it with the default sampler, and photographs the canvas replayed at its
middle step (as the page drew it while denoising; when the heads filled the canvas in one step, that step) with the
check report."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(url: str, seconds: float = 180.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the studio did not answer at {url}")


def pick(page, dropdown_id: str, option: str) -> None:
    page.locator(f"#{dropdown_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "simulate.png"))
    parser.add_argument("--order", default="ORD-23411", help="The retail order to ask a refund for.")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wmstudio-shot-"))
    port = free_port()
    env = {**os.environ, "WMSTUDIO_HOME": str(home)}
    server = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "serve", "--port", str(port), "--db",
                               str(home / "studio.db")], env=env, cwd=ROOT)
    try:
        url = f"http://127.0.0.1:{port}/"
        wait_for(url)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 900}, device_scale_factor=1)
            page.goto(url)
            page.get_by_role("tab", name="Simulate").click()
            pick(page, "simulate-world", "retail (v1)")
            pick(page, "simulate-tool", "refund_order")
            expect(page.locator("#simulate-tool-note")).to_contain_text("refund_order", timeout=20_000)
            page.get_by_label("order_id · text · required").press_sequentially(args.order)
            page.get_by_label("amount_cents · whole number · required").press_sequentially("1500")
            page.get_by_label("reason · text").press_sequentially("arrived damaged")
            arguments = page.locator("#simulate-arguments")
            expect(arguments).to_contain_text('"reason": "arrived damaged"', timeout=10_000)  # the form reached Run
            page.get_by_label("status · one of ok | partial | error").click()
            page.get_by_role("option", name="error", exact=True).click()
            page.locator("#simulate-run").click()
            page.wait_for_function("document.querySelector('#simulate-canvas .wm-canvas')?.dataset.done === '1'",
                                   timeout=120_000)
            steps = int(page.locator("#simulate-canvas .wm-canvas").get_attribute("data-step")) + 1
            scrubber = page.locator("#simulate-scrubber input[type=number]")
            scrubber.fill(str(max(1, steps // 2)))  # half-way, as the page showed the canvas while denoising
            scrubber.press("Enter")
            expect(page.locator("#simulate-canvas .wm-canvas")).to_have_attribute("data-step", str(max(0, steps // 2 - 1)))
            page.screenshot(path=args.out, clip=_clip(page), full_page=True)
            browser.close()
        print(f"wrote {args.out}")
    finally:
        server.terminate()
        server.wait(30)


def _clip(page) -> dict[str, float]:
    """From the tabs down to the replay slider: the call, the pinned anchor, the run's status and the canvas."""
    page.evaluate("window.scrollTo(0, 0)")
    top = page.get_by_role("tab", name="Simulate").bounding_box()
    bottom = page.locator("#simulate-scrubber").bounding_box()
    y = max(0.0, top["y"] - 12)
    return {"x": 0, "y": y, "width": 1280, "height": bottom["y"] + bottom["height"] - y + 12}


if __name__ == "__main__":
    main()
