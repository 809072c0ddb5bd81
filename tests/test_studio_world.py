"""The studio's World tab over HTTP: load a demo world, validate, save, import tools — as a client would.

Launches the real Gradio app on a free loopback port and drives it with gradio_client."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from gradio_client import Client, handle_file

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.world.spec import load_world

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    patch = pytest.MonkeyPatch()
    patch.setenv("WMSTUDIO_HOME", str(home))
    from wmstudio.ui.studio import build_studio

    app = build_studio()
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=_free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False), home
    app.close()
    patch.undo()


def test_load_validate_and_save_a_demo_world(studio):
    client, home = studio
    retail = str(DEMO_WORLDS_DIR / "retail.json")
    *fields, status = client.predict(retail, api_name="/load_world")
    assert fields[0] == load_world(retail).name
    assert "Loaded" in status

    assert "Valid world" in client.predict(*fields, api_name="/validate_world")

    fields[2] = "A customer disputes a refund."  # edit the task, then save under a new name
    status, _ = client.predict("my-retail", *fields, api_name="/save_world")
    saved = home / "worlds" / "my-retail.json"
    assert saved.exists(), status
    assert load_world(saved).task == "A customer disputes a refund."


def test_broken_rule_and_bad_state_are_reported_with_paths_and_nothing_is_saved(studio):
    client, home = studio
    *fields, _ = client.predict(str(DEMO_WORLDS_DIR / "retail.json"), api_name="/load_world")
    fields[3] = '{"orders": [1, 2'  # initial state: broken JSON
    fields[5] = json.dumps([{"text": "totals are positive", "check": "response.total >"}])
    status, _ = client.predict("broken", *fields, api_name="/save_world")
    assert "`initial_state`" in status and "`rules[0].check`" in status
    assert "Traceback" not in status
    assert not (home / "worlds" / "broken.json").exists()


def test_import_tools_from_a_bfcl_file_appends_normalised_tools(studio):
    client, _ = studio
    tools_text, status = client.predict(
        handle_file(str(SAMPLES / "bfcl" / "multi_turn_func_doc" / "math_api.json")), "auto", "[]",
        api_name="/import_tools",
    )
    tools = json.loads(tools_text)
    assert len(tools) == 17 and all(t["type"] == "function" for t in tools)
    assert "Imported 17 tool(s)" in status


def test_import_of_a_malformed_file_keeps_the_editor_and_explains(studio, tmp_path):
    client, _ = studio
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "x", "parameters": ', encoding="utf-8")
    tools_text, status = client.predict(handle_file(str(bad)), "auto", '[{"name": "keep"}]', api_name="/import_tools")
    assert tools_text == '[{"name": "keep"}]'
    assert "invalid JSON" in status
