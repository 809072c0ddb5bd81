"""A folder's listing: `ls` answers the entries the state holds under the folder (name order, a file's size from
its contents), as the episode left them, cut to the page the tool states with the count and flag saying so."""

from __future__ import annotations

import json

import pytest

from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.model.generation.generation import generate
from wmstudio.model.heads.folder_listing import folder_listing
from wmstudio.model.serving.backends import load_backend
from wmstudio.world.history import HistoryStep
from wmstudio.world.simulators import get_simulator
from wmstudio.world.spec import Call, load_world, parse_world


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def _answer(backend, world, call, history=()):
    return json.loads(generate(backend, world, call, history=list(history)).samples[0].response)


def test_ls_answers_the_folder_as_the_simulator_does_and_as_the_episode_left_it(backend):
    world, sim = load_world(DEMO_WORLDS_DIR / "filesystem.json"), get_simulator("filesystem")
    for path in ("/home/maria", "/home/maria/docs", "docs", "/"):
        call = Call("ls", {"path": path})
        assert _answer(backend, world, call) == sim.step(world.initial_state, call)[1], path
    removed = HistoryStep(Call("rm", {"path": "/home/maria/docs/budget.csv"}),
                          {"path": "/home/maria/docs/budget.csv", "removed": 1, "error": "", "message": "",
                           "status": "ok"})
    made = HistoryStep(Call("mkdir", {"path": "old"}),
                       {"path": "/home/maria/old", "created": True, "error": "", "message": "", "status": "ok"})
    docs = _answer(backend, world, Call("ls", {"path": "/home/maria/docs"}), [removed])
    assert [entry["name"] for entry in docs["entries"]] == ["todo.md"] and docs["count"] == 1
    home = _answer(backend, world, Call("ls", {"path": "/home/maria"}), [removed, made])
    assert {"name": "old", "type": "dir", "size": 4096} in home["entries"] and home["count"] == 5


def test_a_folder_longer_than_the_page_is_cut_with_its_count_and_flag():
    files = {f"/data/f{index:02d}.txt": "x" * index for index in range(11)}
    world = parse_world({
        "name": "disk",
        "initial_state": {"cwd": "/data", "dirs": ["/", "/data"], "files": files},
        "tools": [{"name": "ls", "description": "List a folder (at most 8 entries).",
                   "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
                   "response": {"type": "object", "properties": {
                       "entries": {"type": "array", "items": {"type": "object", "properties": {
                           "name": {"type": "string"}, "size": {"type": "integer"}}}},
                       "count": {"type": "integer"}, "truncated": {"type": "boolean"},
                       "status": {"type": "string"}}}}]})
    schema = world.tool("ls").response
    copy = folder_listing(world, Call("ls", {"path": "."}), [], schema, world.initial_state)
    assert copy.listed == 8
    assert copy.values["entries[0].name"] == "f00.txt" and copy.values["entries[7].size"] == 7
    assert copy.values["count"] == 11 and copy.values["truncated"] is True
    assert folder_listing(world, Call("ls", {"path": "/nope"}), [], schema, world.initial_state) is None


def test_find_answers_every_path_under_the_folder_whose_name_the_glob_matches(backend):
    world, sim = load_world(DEMO_WORLDS_DIR / "filesystem.json"), get_simulator("filesystem")
    for path, glob in (("/home", "*.txt"), ("/", "*.md"), ("/home/maria", "*"), ("/home/maria/docs", "*.py")):
        call = Call("find", {"path": path, "name": glob})
        assert _answer(backend, world, call) == sim.step(world.initial_state, call)[1], (path, glob)
    moved = HistoryStep(Call("mv", {"source": "notes.txt", "destination": "docs/notes.txt"}),
                        {"source": "/home/maria/notes.txt", "destination": "/home/maria/docs/notes.txt",
                         "moved": True, "error": "", "message": "", "status": "ok"})
    found = _answer(backend, world, Call("find", {"path": "/home", "name": "notes*"}), [moved])
    assert found["matches"] == ["/home/maria/docs/notes.txt"] and found["count"] == 1
