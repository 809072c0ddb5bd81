"""The studio's World tab over HTTP: load a saved world, validate, save new versions, open and download files,
import tools — as a client would. Launches the real Gradio app on a loopback port over a real SQLite store."""

from __future__ import annotations

import dataclasses
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from serving import free_port

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import open_store, save_world_version, world_versions
from wmstudio.studio.context import StudioContext
from wmstudio.ui.studio import build_studio
from wmstudio.ui.world_tab import FIELDS, world_file_for_download, world_to_fields
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import load_world

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("db") / "studio.db")
    retail = save_world_version(store, load_world(DEMO_WORLDS_DIR / "retail.json"))
    ctx = StudioContext(store=store)
    app = build_studio(ctx)
    app.queue()
    _, url, _ = app.launch(server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    yield Client(url, verbose=False), ctx, retail.id
    app.close()


def test_load_edit_and_save_creates_a_new_version(studio):
    client, ctx, retail_id = studio
    *fields, status = client.predict(retail_id, api_name="/load_world")
    assert fields[0] == load_world(DEMO_WORLDS_DIR / "retail.json").name
    assert "Loaded" in status and "v1" in status
    assert "Valid world" in client.predict(*fields, api_name="/validate_world")

    fields[3] = "A customer disputes a refund."
    status, _, _ = client.predict(*fields, api_name="/save_world")
    assert "v2" in status
    versions = world_versions(ctx.store, fields[0])
    assert [v.version for v in versions] == [2, 1]
    assert versions[0].spec().task == "A customer disputes a refund."
    assert versions[1].spec().task != "A customer disputes a refund."  # the old version is untouched


def test_broken_rule_and_bad_state_are_reported_with_paths_and_nothing_is_saved(studio):
    client, ctx, retail_id = studio
    *fields, _ = client.predict(retail_id, api_name="/load_world")
    before = len(world_versions(ctx.store, fields[0]))
    fields[4] = '{"orders": [1, 2'  # initial state: broken JSON
    fields[6] = json.dumps([{"text": "totals are positive", "check": "response.total >"}])
    status, _, _ = client.predict(*fields, api_name="/save_world")
    assert "`initial_state`" in status and "`rules[0].check`" in status
    assert "Traceback" not in status
    assert len(world_versions(ctx.store, fields[0])) == before


def test_open_a_world_file_and_download_it_back(studio, tmp_path):
    client, _, _ = studio
    *fields, status = client.predict(handle_file(str(DEMO_WORLDS_DIR / "airline.json")), api_name="/open_world_file")
    assert "Save to keep it" in status
    downloaded = client.predict(*fields, api_name="/download_world")
    assert load_world(downloaded) == load_world(DEMO_WORLDS_DIR / "airline.json")


def test_download_files_written_by_many_events_at_once_are_all_whole():
    # a page load fires the download event once per field, and several pages load at once: each event writes
    # the same file, and none may lose it (a shared temporary name did: FileNotFoundError in the server log)
    events, airline = len(FIELDS), load_world(DEMO_WORLDS_DIR / "airline.json")
    for round_ in range(10):
        world = dataclasses.replace(airline, task=f"{airline.task} (round {round_})")  # a new file each round
        fields, start = world_to_fields(world), threading.Barrier(events)

        def fire(_: int) -> str:
            start.wait()
            return world_file_for_download(*fields)

        with ThreadPoolExecutor(events) as pool:
            [path] = set(pool.map(fire, range(events)))
        assert load_world(path) == world


def test_import_tools_from_a_bfcl_file_adds_replaces_or_starts_a_new_world(studio):
    """Importing once appended to the loaded world's tools whatever one wanted; now the import says where its
    tools go: added to those shown, in their place, or as a new world named after the file."""
    client, _, _ = studio
    math_api = handle_file(str(SAMPLES / "bfcl" / "multi_turn_func_doc" / "math_api.json"))
    shown = '[{"type": "function", "function": {"name": "mine", "description": "", "parameters": {}}}]'
    *fields, status = client.predict(math_api, "auto", shown, "add", api_name="/import_tools")
    tools = json.loads(fields[5])
    assert len(tools) == 18 and tools[0]["function"]["name"] == "mine" and all(t["type"] == "function" for t in tools)
    assert "Imported 17 tool(s)" in status and "added to the tools shown" in status
    *fields, status = client.predict(math_api, "auto", shown, "replace", api_name="/import_tools")
    assert len(json.loads(fields[5])) == 17 and "in place of the tools shown" in status
    *fields, status = client.predict(math_api, "auto", shown, "new", api_name="/import_tools")
    assert fields[0] == "math_api" and fields[3] == "" and fields[4] == "{}" and fields[6] == "[]"
    assert len(json.loads(fields[5])) == 17 and "as a new world" in status


def test_new_world_empties_every_field(studio):
    client, _, _ = studio
    picker, version, *fields, status = client.predict(api_name="/new_world")
    assert fields == ["", "", "(none)", "", "{}", "[]", "[]", ""] and "A new world" in status


def test_import_of_a_malformed_file_keeps_the_editor_and_explains(studio, tmp_path):
    client, _, _ = studio
    bad = tmp_path / "bad.json"
    bad.write_text('[{"name": "x", "parameters": ', encoding="utf-8")
    *fields, status = client.predict(handle_file(str(bad)), "auto", '[{"name": "keep"}]', "add",
                                     api_name="/import_tools")
    assert "invalid JSON" in status and "keep" not in json.dumps(fields)  # nothing sent back: the editor keeps it
    # named as uploaded: not the server's copy in Gradio's temporary folder (/tmp/gradio/<hash>/bad.json)
    assert "- bad.json:1:" in status and "gradio" not in status and "/" not in status.split("bad.json")[0]
    *_, opened = client.predict(handle_file(str(bad)), api_name="/open_world_file")
    assert "Cannot open the file" in opened and "bad.json" in opened and "gradio" not in opened


def test_asking_the_model_for_a_schema_gives_a_trained_tools_own_and_otherwise_says_why_not(studio):
    client, ctx, retail_id = studio
    *fields, _ = client.predict(retail_id, api_name="/load_world")
    name, tools = fields[0], json.loads(fields[5])
    for tool in tools:
        (tool.get("function") or tool).pop("response", None)  # a copy of the demo world without its schemas
    fields[5] = json.dumps(tools)
    tools_text, status = client.predict("refund_order", *fields, api_name="/sketch_schema")
    restored = next(t.get("function") or t for t in json.loads(tools_text)
                    if (t.get("function") or t)["name"] == "refund_order")
    assert restored["response"] == get_simulator("retail").world().tool("refund_order").response
    assert "trained with" in status
    fields[0] = "my-shop"  # another world's refund_order is not the tool the model trained on
    _, status = client.predict("refund_order", *fields, api_name="/sketch_schema")
    assert "not trained on a tool 'refund_order'" in status and "paste an example response" in status
    fields[0] = name
    _, refused = client.predict("launch_rocket", *fields, api_name="/sketch_schema")
    assert "no tool 'launch_rocket'" in refused and "refund_order" in refused


def test_a_long_world_name_downloads_under_a_capped_name_from_a_private_folder(tmp_path):
    """A 300-character name once broke the download (file name too long); the file's path was predictable, so a
    file another user planted there was served as the world."""
    import hashlib
    import os
    import stat
    import tempfile

    from wmstudio.ui.world_tab import MAX_FILE_STEM, downloads_folder

    retail = load_world(DEMO_WORLDS_DIR / "retail.json")
    planted = Path(tempfile.gettempdir()) / f"wmstudio-world-{hashlib.sha256(retail.dumps().encode()).hexdigest()[:16]}"
    planted.mkdir(exist_ok=True)
    (planted / "retail.json").write_text('{"name": "retail", "task": "planted by someone else"}')
    path = Path(world_file_for_download(*world_to_fields(retail)))
    assert load_world(path) == retail and planted not in path.parents
    assert downloads_folder() in path.parents and stat.S_IMODE(os.stat(downloads_folder()).st_mode) == 0o700

    long = dataclasses.replace(retail, name="r" * 300)
    path = Path(world_file_for_download(*world_to_fields(long)))
    assert len(path.stem) <= MAX_FILE_STEM and load_world(path) == long
