"""A dataset import writes in short batches under its rows' fingerprint: the studio keeps saving meanwhile (its saves
wait a batch, never the whole import); killed at any point it leaves whole batches that its record lists, and the
same rows imported again finish it, or, once finished, return the rollouts of the first import (no copies).
Zip archives are checked while they unpack: a zip bomb is refused in seconds.

The kills are real: a child process imports 300 rollouts and gets SIGKILL at a random moment of its write."""

from __future__ import annotations

import json
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
from wmstudio.store import (
    Imported,
    MadeBy,
    NewRollout,
    NewStep,
    append_step,
    create_rollout,
    import_rollouts,
    open_store,
    save_world_version,
)
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
def test_an_import_killed_at_random_points_leaves_whole_batches_that_a_retry_finishes(dataset, empty_db, tmp_path):
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
        rollouts, steps, records = counts(db)
        listed, finished = import_record(db)
        assert steps == rollouts * STEPS_EACH and listed == rollouts, f"attempt {attempt}: a torn batch"
        assert records <= 1 and finished == (rollouts == ROLLOUTS and records == 1 and finished)
        outcomes.append(rollouts)
        retried = import_dataset_file(open_store(db), dataset)  # the retry finishes what the kill stopped, once
        assert len(retried.rollout_ids) == ROLLOUTS and retried.repeated == bool(finished)
        assert counts(db) == (ROLLOUTS, ROLLOUTS * STEPS_EACH, 1) and import_record(db) == (ROLLOUTS, True)
    print(f"write {write_s:.2f} s; rollouts left by the kills: {outcomes}")


def import_record(db: Path) -> tuple[int, bool]:
    """(rollouts listed, finished) of the one import record in the file; (0, False) with none."""
    engine = sa.create_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as connection:
            row = connection.exec_driver_sql("SELECT rollout_ids, finished FROM dataset_import").first()
    finally:
        engine.dispose()
    return (0, False) if row is None else (len(json.loads(row[0])), bool(row[1]))


def test_the_studio_keeps_saving_while_a_big_import_runs(empty_db, tmp_path):
    """`wmstudio curricula import` of 2,500 rollouts (37 MB of rows) in a real process while this one saves 20 steps
    as the studio's Save step does: none fails and none waits a second (one transaction for the whole import kept
    them waiting for all of it; 5,000 rollouts made the studio's saves fail with "database is locked")."""
    big = 2_500
    world = counter_world()
    made_by = MadeBy.by_model("wmstudio-tiny", seed=0).to_json()
    note = "x" * 5_000
    source = export_dataset([ExportRollout(id=str(i), world=world, title=f"run {i}", status="pending", tags=[],
                                           steps=[ExportStep(Call("bump", {"by": k}), json.dumps({"value": k,
                                                             "note": note}), None, made_by) for k in range(2)])
                             for i in range(big)], tmp_path / "big", "big")
    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    store = open_store(db)
    target = create_rollout(store, save_world_version(store, counter_world()).id, title="saved meanwhile")
    child = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "curricula", "import", str(source), "--db",
                              str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waits = []
    while child.poll() is None or len(waits) < 20:  # a save every 0.1 s from the start to the end of the import
        begun = time.monotonic()
        append_step(store, target.id, Call("bump", {"by": len(waits)}), '{"value": 1}', MadeBy.by_hand("ann"))
        waits.append(time.monotonic() - begun)
        time.sleep(0.1)
    out, err = child.communicate(timeout=600)
    assert child.returncode == 0, err[-2000:]
    assert len(json.loads(out)["rollouts"]) == big and counts(db)[1] == 2 * big + len(waits)
    assert max(waits) < 1.0, f"the longest of {len(waits)} saves waited {max(waits):.2f} s"


def test_a_zip_bomb_is_refused_while_it_unpacks_in_seconds_and_little_memory(empty_db, tmp_path, monkeypatch):
    """A 250 MB file packed into 240 KB (once: 2.4 GB of memory and exit 0 with nothing imported), one whose header
    understates what it unpacks to, and one over the size limit: each refused naming the zip, nothing written."""
    from wmstudio.studio import dataset_zip

    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    bomb = tmp_path / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as bundle:
        bundle.writestr("big/README.md", "---\npretty_name: big\n---\n")
        with bundle.open("big/data/train.jsonl", "w", force_zip64=True) as handle:
            for _ in range(250):
                handle.write(b"{" + b" " * 1_000_000 + b"}\n")
    assert bomb.stat().st_size < 400_000
    started = time.monotonic()
    measured = subprocess.run([sys.executable, "-c", PEAK, sys.executable, "-m", "wmstudio.cli", "curricula", "import",
                               str(bomb), "--db", str(db)], capture_output=True, text=True, timeout=120)
    code, peak_mb, said = measured.stdout.split("\n", 2)
    assert int(code) == 2 and "zip bomb" in said and "bomb.zip" in said, measured.stdout[-1000:]
    assert time.monotonic() - started < 5 and int(peak_mb) < 1_000, (time.monotonic() - started, peak_mb)
    assert counts(db) == (0, 0, 0)

    lying = tmp_path / "lying.zip"  # a header that says 10 bytes for 2 MB of rows
    with zipfile.ZipFile(lying, "w", compression=zipfile.ZIP_STORED) as bundle:
        bundle.writestr("big/data/train.jsonl", b"x" * 2_000_000)
    data = bytearray(lying.read_bytes())
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.find(signature)
        data[at + offset:at + offset + 4] = (10).to_bytes(4, "little")
    lying.write_bytes(bytes(data))
    with pytest.raises(InvalidInput, match="lying.zip"):
        import_dataset_file(open_store(db), lying)

    over = tmp_path / "over.zip"
    with zipfile.ZipFile(over, "w", compression=zipfile.ZIP_STORED) as bundle:
        bundle.writestr("big/data/train.jsonl", b"{}\n" * 1_000)
    monkeypatch.setattr(dataset_zip, "MAX_UNZIPPED_BYTES", 1_000)
    with pytest.raises(InvalidInput, match="over the 1,000-byte limit"):
        import_dataset_file(open_store(db), over)
    assert counts(db) == (0, 0, 0)


PEAK = """import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(done.returncode)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
print(done.stderr[-1000:])"""  # the exit code, the command's peak memory (MB) and what it said


def test_the_zip_of_an_import_is_checked_before_anything_is_written(empty_db, tmp_path):
    db = tmp_path / "studio.db"
    shutil.copy(empty_db, db)
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        bundle.writestr("../../outside.txt", "no")
    with pytest.raises(InvalidInput, match="unsafe path"):
        import_dataset_file(open_store(db), archive)
    assert counts(db) == (0, 0, 0)
