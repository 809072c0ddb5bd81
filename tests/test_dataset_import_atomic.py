"""A dataset import is one transaction and is recorded by its rows' fingerprint: killed at any point it leaves no
rollout or all of them, and the same rows imported again return the rollouts of the first import.

The kills are real: a child process imports 300 rollouts and gets SIGKILL at a random moment of its write."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
import sqlalchemy as sa

from wmstudio.problems import InvalidInput
from wmstudio.store import Imported, MadeBy, NewRollout, NewStep, import_rollouts, open_store
from wmstudio.studio.curricula import import_dataset_file, zip_folder
from wmstudio.studio.datasets import ExportRollout, ExportStep, export_dataset
from wmstudio.world.spec import Call, parse_world

ROLLOUTS = 300
STEPS_EACH = 2

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path

    import wmstudio.studio.curricula as curricula
    from wmstudio.store import open_store

    store = open_store(sys.argv[1])
    write = curricula.import_rollouts

    def announced(*args, **kwargs):  # the parent times its kill from the start of the write
        print("writing", flush=True)
        return write(*args, **kwargs)

    curricula.import_rollouts = announced
    print("ready", flush=True)
    result = curricula.import_dataset_file(store, Path(sys.argv[2]))
    print("done", len(result.rollout_ids), flush=True)
""")


def counter_world():
    return parse_world({
        "name": "counter",
        "tools": [{"type": "function", "function": {
            "name": "bump", "description": "Add one to the counter",
            "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}},
            "response": {"type": "object", "properties": {"value": {"type": "integer"}}}}}],
    })


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """An exported folder of 300 rollouts of two steps each."""
    world = counter_world()
    made_by = MadeBy.by_model("wmstudio-tiny", seed=0).to_json()
    rollouts = [ExportRollout(id=str(i), world=world, title=f"run {i}", status="accepted" if i % 2 else "pending",
                              tags=["bulk"] if i % 3 == 0 else [],
                              steps=[ExportStep(Call("bump", {"by": k}), f'{{"value": {i + k}}}', None, made_by)
                                     for k in range(STEPS_EACH)])
                for i in range(ROLLOUTS)]
    return export_dataset(rollouts, tmp_path_factory.mktemp("export") / "counter", "counter")


@pytest.fixture(scope="module")
def empty_db(tmp_path_factory) -> Path:
    """A migrated, empty database file to copy (migrating once keeps every attempt short)."""
    path = tmp_path_factory.mktemp("db") / "empty.db"
    open_store(path).close()
    return path


def counts(db: Path) -> tuple[int, int, int]:
    """(rollouts, steps, import records) in the file, read with a fresh connection."""
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            return tuple(connection.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one()
                         for table in ("rollout", "step", "dataset_import"))
    finally:
        engine.dispose()


def start_child(db: Path, dataset: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[1]),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db), str(dataset)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(child: subprocess.Popen, word: str) -> None:
    line = child.stdout.readline()
    assert line.startswith(word), f"child said {line!r}; stderr: {child.stderr.read()[-2000:]}"


def test_the_same_rows_imported_twice_give_the_rollouts_of_the_first_import(dataset, empty_db, tmp_path):
    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    store = open_store(db)
    first = import_dataset_file(store, dataset)
    again = import_dataset_file(store, dataset)
    from_zip = import_dataset_file(store, zip_folder(dataset))  # another zip of the same folder: the same rows
    assert len(first.rollout_ids) == ROLLOUTS and first.steps == ROLLOUTS * STEPS_EACH and not first.repeated
    assert again.rollout_ids == first.rollout_ids and again.repeated and from_zip.rollout_ids == first.rollout_ids
    assert counts(db) == (ROLLOUTS, ROLLOUTS * STEPS_EACH, 1)


def test_a_bad_rollout_writes_nothing(empty_db, tmp_path):
    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    store = open_store(db)
    good = NewRollout(counter_world(), [NewStep(Call("bump", {}), '{"value": 1}', MadeBy.by_hand("ann"))])
    bad = NewRollout(counter_world(), [NewStep(Call("bump", {}), 42, MadeBy.by_hand("ann"))])  # not text
    with pytest.raises(InvalidInput, match=r"rollouts\[1\]\.response"):
        import_rollouts(store, [good, bad], "f" * 64)
    assert counts(db) == (0, 0, 0)
    made = import_rollouts(store, [good], "f" * 64)  # the failed import left no record of itself either
    assert made.steps == 1 and not made.repeated
    assert import_rollouts(store, [], "f" * 64) == Imported(made.rollout_ids, 1, repeated=True)


@pytest.mark.slow
def test_an_import_killed_at_random_points_leaves_nothing_or_everything(dataset, empty_db, tmp_path):
    # How long the write takes here, from an import left to finish.
    db = tmp_path / "timed.db"
    shutil.copy(empty_db, db)
    child = start_child(db, dataset)
    wait_for(child, "ready")
    wait_for(child, "writing")
    started = time.monotonic()
    wait_for(child, "done")
    write_s = time.monotonic() - started
    child.wait(timeout=60)
    assert counts(db) == (ROLLOUTS, ROLLOUTS * STEPS_EACH, 1)

    chance = random.Random(13)
    outcomes = []
    for attempt in range(6):
        db = tmp_path / f"killed-{attempt}.db"
        shutil.copy(empty_db, db)
        child = start_child(db, dataset)
        wait_for(child, "ready")
        wait_for(child, "writing")
        time.sleep(chance.uniform(0, write_s * 1.2))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
        found = counts(db)
        assert found in ((0, 0, 0), (ROLLOUTS, ROLLOUTS * STEPS_EACH, 1)), f"attempt {attempt}: {found}"
        outcomes.append(found[0])
        retried = import_dataset_file(open_store(db), dataset)  # the retry completes what the kill stopped, once
        assert len(retried.rollout_ids) == ROLLOUTS and retried.repeated == (found[0] == ROLLOUTS)
        assert counts(db) == (ROLLOUTS, ROLLOUTS * STEPS_EACH, 1)
    print(f"write {write_s:.2f} s; rollouts left by the kills: {outcomes}")


def test_the_zip_of_an_import_is_checked_before_anything_is_written(empty_db, tmp_path):
    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("../../outside.txt", "no")
    with pytest.raises(InvalidInput, match="unsafe path"):
        import_dataset_file(open_store(db), archive)
    assert counts(db) == (0, 0, 0)
