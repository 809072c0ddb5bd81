"""Ten API clients generating at once against one studio on the embedded default model: every one gets its
whole result (all frames, the final canvas fully unmasked, the check report), none an error.

The real studio (all tabs, real SQLite store, shipped model) served by Gradio's queue over loopback."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from gradio_client import Client
from serving import free_port

from wmstudio.store import list_worlds
from wmstudio.ui.forms import MASKED
from wmstudio.ui.simulate_tab import ANCHOR_SLOTS
from wmstudio.ui.studio import build_studio, open_context

pytestmark = pytest.mark.slow

CLIENTS = 10
CANVAS_STATE = re.compile(r'data-step="(-?\d+)" data-done="(\d)" data-masked="(\d+)"')
CALLS = [
    ("retail", "get_order", '{"order_id": "ORD-22930"}'),
    ("retail", "refund_order", '{"order_id": "ORD-22930", "amount_cents": 500}'),
    ("airline", "search_flights", '{"origin": "DEN", "destination": "PHX", "date": "2025-08-09"}'),
    ("filesystem", "ls", '{"path": "/home"}'),
    ("records", "search_records", '{"city": "Lisbon"}'),
]


@pytest.fixture(scope="module")
def studio_url(tmp_path_factory):
    ctx = open_context(db=tmp_path_factory.mktemp("db") / "studio.db")  # seeds the demo worlds
    ctx.backend()
    app = build_studio(ctx)
    app.queue(default_concurrency_limit=4)
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield url, {w.name: w.latest.id for w in list_worlds(ctx.store)}
    app.close()


def _simulate(url: str, world_id: int, tool: str, arguments: str, seed: int):
    client = Client(url, verbose=False)
    inputs = [world_id, tool, arguments, "", 8, "low_confidence", 0.9, 0, 0.7, 1.0, 1, seed, False, 64,
              *[MASKED] * ANCHOR_SLOTS]
    job = client.submit(*inputs, api_name="/simulate")
    status, canvas, _, _, report, _ = job.result(timeout=300)
    return status, canvas, report, len(job.outputs())


def test_ten_clients_generating_at_once_all_get_complete_results(studio_url):
    url, worlds = studio_url
    jobs = [(worlds[w], tool, args, seed) for seed, (w, tool, args) in enumerate(CALLS * (CLIENTS // len(CALLS)))]
    with ThreadPoolExecutor(max_workers=CLIENTS) as pool:
        results = list(pool.map(lambda job: _simulate(url, *job), jobs))
    assert len(results) == CLIENTS
    for status, canvas, report, updates in results:
        assert "Done:" in status, status
        step, done, masked = CANVAS_STATE.search(canvas).groups()
        assert done == "1" and masked == "0"  # the whole response was drawn
        assert "JSON: valid" in report  # skeleton mode: parseable JSON, checked
        assert updates >= 3  # streamed: the empty canvas, frames, the final state
