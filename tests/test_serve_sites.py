"""What a web page, a slow client or a greedy one can do to a server on loopback with no key (issue 36), against
real servers: `serve-wm`'s app under uvicorn and the studio as `python app.py` launches it.

- A page's `text/plain;charset=json` post (sent without a CORS preflight) no longer runs the model: 415.
- A foreign `Origin` is refused on the model routes, the OpenEnv WebSocket and the studio's Gradio API (which
  starts training runs); a foreign `Host` (DNS rebinding) on the studio's API too; the page's own origin and an
  allowed one pass.
- A client that never finishes its request head is disconnected; a body that does not arrive gets a 408.
- One client holds at most `sockets_per_client` OpenEnv sessions, and an idle session is closed."""

from __future__ import annotations

import json
import socket
import time

import httpx
import pytest
from serving import free_port, read_reply
from test_serve_http import serve
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from wmstudio.model.serving.backends import load_backend
from wmstudio.serve.deadlines import HeadDeadline
from wmstudio.serve.service import WorldModelService
from wmstudio.serve.site_guard import ALLOWED_ORIGINS_ENV
from wmstudio.store import open_store
from wmstudio.store.seeding import demo_worlds, seed_first_run

RETAIL = next(world for world in demo_worlds() if world.name == "retail")
STEP = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": "ORD-23411"}},
        "sampler": {"steps": 2}}


@pytest.fixture(scope="module")
def served(tmp_path_factory, one_thread):
    store = open_store(tmp_path_factory.mktemp("sites") / "studio.db")
    seed_first_run(store)
    service = WorldModelService.create(load_backend(), store=store, world=RETAIL, free_tokens=8, body_seconds=1.0,
                                       sockets_per_client=2, socket_idle_seconds=1.5)
    server, url = serve(service)
    yield url, service
    server.should_exit = True


def test_a_text_plain_post_that_says_json_does_not_run_the_model(served):
    url, _ = served
    for kind in ("text/plain;charset=json", "text/plain; charset=application/json", "application/jsonp",
                 "multipart/form-data; boundary=json"):
        reply = httpx.post(f"{url}/v1/world/step", content=json.dumps(STEP), headers={"content-type": kind})
        assert reply.status_code == 415 and reply.json()["detail"][0]["loc"] == ["header", "content-type"], kind
    for kind in ("application/json", "Application/JSON; charset=utf-8", "application/vnd.api+json"):
        assert httpx.post(f"{url}/v1/world/step", content=json.dumps(STEP), headers={"content-type": kind},
                          timeout=120).status_code == 200, kind


def test_a_foreign_origin_is_refused_on_the_model_routes_and_the_openenv_socket(served, monkeypatch):
    url, _ = served
    port = url.rsplit(":", 1)[1]
    for origin in ("http://evil.example", "null", f"http://127.0.0.1:{int(port) + 1}", "http://localhost.evil.example"):
        reply = httpx.post(f"{url}/v1/world/step", json=STEP, headers={"Origin": origin})
        assert reply.status_code == 403 and reply.json()["detail"][0]["loc"] == ["header", "origin"], origin
        with pytest.raises(InvalidStatus) as refused, connect(f"ws://127.0.0.1:{port}/openenv/ws", origin=origin):
            pass
        assert refused.value.response.status_code == 403
    assert httpx.post(f"{url}/v1/world/step", json=STEP, headers={"Origin": url}, timeout=120).status_code == 200
    with connect(f"ws://127.0.0.1:{port}/openenv/ws", origin=url) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"curriculum": "demo", "scenario": 0}}))
        assert json.loads(ws.recv(timeout=60))["type"] == "observation"
    monkeypatch.setenv(ALLOWED_ORIGINS_ENV, "https://trainer.example, http://evil.example")
    assert httpx.post(f"{url}/v1/world/step", json=STEP, headers={"Origin": "http://evil.example"},
                      timeout=120).status_code == 200


def test_a_stalled_request_head_is_disconnected_and_a_stalled_body_gets_408(served, monkeypatch):
    url, _ = served
    port = int(url.rsplit(":", 1)[1])
    monkeypatch.setattr(HeadDeadline, "head_seconds", 1.0)
    for sent in (b"", b"POST /v1/world/step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(sent)
            started = time.monotonic()
            assert conn.recv(1024) == b""  # closed by the server
            assert time.monotonic() - started < 5
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"POST /v1/world/step HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 500\r\n\r\n{\"world\": ")
        status, body = read_reply(conn)
        assert status == 408 and "did not arrive within 1 s" in body


def test_one_client_cannot_hold_every_session_and_an_idle_one_is_closed(served):
    url, service = served
    where = f"ws://127.0.0.1:{url.rsplit(':', 1)[1]}/openenv/ws"
    with connect(where) as first, connect(where):
        with pytest.raises(InvalidStatus) as refused, connect(where):
            pass
        assert refused.value.response.status_code == 403  # closed before it opened: the client's cap
        time.sleep(service.socket_idle_seconds + 1)
        with pytest.raises(ConnectionClosed):
            first.send(json.dumps({"type": "reset", "data": {"curriculum": "demo"}}))
            first.recv(timeout=10)
        assert first.close_code == 1001 and "idle" in first.close_reason
    with connect(where) as again:  # the idle ones were freed
        again.send(json.dumps({"type": "reset", "data": {"curriculum": "demo", "scenario": 1}}))
        assert json.loads(again.recv(timeout=60))["type"] == "observation"


def test_the_studios_api_refuses_foreign_hosts_and_origins(tmp_path, monkeypatch, one_thread):
    """The studio as `python app.py` launches it: its Gradio API (start_run among its endpoints) answers only its own
    site; the page itself and scripts without an Origin (gradio_client) are unaffected; a stalled head is closed."""
    from wmstudio.ui.studio import launch

    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path))
    port = free_port()
    studio = launch(port=port, db=tmp_path / "studio.db", prevent_thread_lock=True, quiet=True)
    url = f"http://127.0.0.1:{port}"
    try:
        assert httpx.get(f"{url}/gradio_api/info", headers={"Host": "evil.example"}).status_code == 403
        join = {"fn_index": 0, "data": [], "session_hash": "x"}
        refused = httpx.post(f"{url}/gradio_api/queue/join", json=join, headers={"Origin": "http://evil.example"})
        assert refused.status_code == 403 and refused.json()["detail"][0]["loc"] == ["header", "origin"]
        assert httpx.post(f"{url}/gradio_api/queue/join", json=join, headers={"Origin": url}).status_code != 403
        assert httpx.get(f"{url}/gradio_api/info").status_code == 200
        assert httpx.get(f"{url}/", headers={"Host": f"localhost:{port}"}).status_code == 200
        monkeypatch.setattr(HeadDeadline, "head_seconds", 1.0)
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:  # a head that never ends
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nAcc")
            started = time.monotonic()
            assert conn.recv(1024) == b"" and time.monotonic() - started < 5  # closed by the studio
    finally:
        studio.close()
