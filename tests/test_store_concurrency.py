"""Two real processes writing one studio database at the same time lose nothing and never see "database is locked".

The second process is a fresh Python interpreter (as a training job would be) or a fork of this one (as a
ZeroGPU worker would be); both go through the store's ordinary functions."""

import importlib.util
import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from sqlmodel import select

from wmstudio.store import (
    MadeBy,
    Step,
    append_step,
    create_rollout,
    get_annotator,
    list_worlds,
    open_store,
    rollout_steps,
    save_world_version,
)
from wmstudio.store.database import current_revision, head_revision
from wmstudio.world.spec import Call, parse_world

pytestmark = pytest.mark.slow

BATCHES, BATCH = 12, 10  # each process writes 12 batches of 10 steps; a rating goes with each of the first 40

# Both writers run this module (saved beside the database): the child in a fresh interpreter, this test in-process. After each batch a writer
# waits until the other has written as many batches, so the two really write at the same time (SQLite's busy
# wait has no fairness: without this, one tight loop can finish before the other gets the lock at all).
WRITER = textwrap.dedent("""
    import time
    from sqlalchemy import func
    from sqlmodel import select
    from wmstudio.store import MadeBy, Step, append_step, save_rating
    from wmstudio.world.spec import Call

    def written_by(store, rollout_id, who):
        with store.read() as session:
            query = select(func.count()).where(Step.rollout_id == rollout_id, Step.response.like(who + " %"))
            return session.exec(query).one()

    def write(store, rollout_id, me, other, annotator_id, shared, batches, batch):
        for b in range(batches):
            for i in range(b * batch, (b + 1) * batch):
                append_step(store, rollout_id, Call("write", {"i": i}), f"{me} {i}",
                            MadeBy.by_model(me))
                if i < len(shared):
                    save_rating(store, annotator_id, shared[i], 1 + i % 5, 3, 4)
            while written_by(store, rollout_id, other) < b * batch:
                time.sleep(0.002)
""")

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    sys.path.insert(0, str(Path(sys.argv[1]).parent))
    from store_writer import write
    from wmstudio.store import get_annotator, open_store
    store = open_store(sys.argv[1])
    annotator = get_annotator(store, "child")
    print("ready", flush=True)
    write(store, int(sys.argv[2]), "child", "parent", annotator.id, json.loads(sys.argv[3]), *map(int, sys.argv[4:6]))
    print("done", flush=True)
""")


def test_a_second_process_writing_steps_and_ratings_at_the_same_time_loses_nothing(tmp_path):
    store = open_store(tmp_path / "studio.db")
    world = save_world_version(store, parse_world({"name": "shared"}))
    rollout = create_rollout(store, world.id, "written by two processes")
    shared = [append_step(store, rollout.id, Call("seed"), "{}", MadeBy.by_hand()).id for _ in range(40)]
    parent = get_annotator(store, "parent")
    (tmp_path / "store_writer.py").write_text(WRITER)
    spec = importlib.util.spec_from_file_location("store_writer", tmp_path / "store_writer.py")
    writer = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(writer)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store.path), str(rollout.id), json.dumps(shared), str(BATCHES), str(BATCH)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready", child.stderr.read()

    writer.write(store, rollout.id, "parent", "child", parent.id, shared, BATCHES, BATCH)
    out, err = child.communicate(timeout=120)

    assert child.returncode == 0 and out.strip() == "done", err
    assert "locked" not in err
    steps = rollout_steps(store, rollout.id)
    total = BATCHES * BATCH
    assert [s.index for s in steps] == list(range(len(shared) + 2 * total))  # no index given twice
    order = [s.provenance().model for s in steps if s.call["name"] == "write"]
    assert Counter(order) == {"parent": total, "child": total}
    assert order.index("child") < total and order.index("parent") < total  # they wrote at the same time
    assert sorted(s.response for s in steps if s.response.startswith("child")) == sorted(
        f"child {i}" for i in range(total))
    with store.read() as session:
        counts = session.exec(select(Step.rating_count).where(Step.id.in_(shared))).all()
    assert counts == [2] * len(shared)  # both ratings of every shared step, counted exactly


def test_three_processes_opening_a_new_file_at_once_migrate_it_once(tmp_path):
    path = tmp_path / "fresh.db"
    go = tmp_path / "go"
    opener = textwrap.dedent("""
        import os, sys, time
        from wmstudio.store import open_store, list_worlds
        print("ready", flush=True)
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.002)
        print(len(list_worlds(open_store(sys.argv[1]))), flush=True)
    """)
    processes = [subprocess.Popen([sys.executable, "-c", opener, str(path), str(go)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
    assert [p.stdout.readline().strip() for p in processes] == ["ready"] * 3  # all loaded and waiting
    go.touch()
    results = [p.communicate(timeout=120) for p in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["0", "0", "0"]
    assert current_revision(path) == head_revision()


def _forked_writer(store, rollout_id: int, count: int) -> None:
    for i in range(count):
        append_step(store, rollout_id, Call("fork"), f"forked {i}", MadeBy.by_model("fork"))
    os._exit(0)


def test_a_forked_worker_uses_its_own_connections(tmp_path):
    store = open_store(tmp_path / "studio.db")
    world = save_world_version(store, parse_world({"name": "forked"}))
    rollout = create_rollout(store, world.id)
    assert list_worlds(store)  # this process's engine and pool are in use before the fork
    worker = multiprocessing.get_context("fork").Process(target=_forked_writer, args=(store, rollout.id, 50))
    worker.start()
    for i in range(50):
        append_step(store, rollout.id, Call("main"), f"main {i}", MadeBy.by_model("main"))
    worker.join(timeout=120)
    assert worker.exitcode == 0
    made = Counter(s.provenance().model for s in rollout_steps(store, rollout.id))
    assert made == {"fork": 50, "main": 50}
