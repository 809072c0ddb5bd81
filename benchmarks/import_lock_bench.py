"""A big dataset import beside a working studio (issue 36): how long the studio's saves wait, and whether any fails.

It exports N rollouts (default 5,000, about 22 KB of rows each: 113 MB of JSONL, as the issue's import) as a dataset
folder, starts `wmstudio curricula import` on it as a real process against a fresh database, and meanwhile saves a
step every 0.25 s into a rollout of that database from this process (as the studio's Save step does), 20 saves by
default. It prints the import's wall time and peak memory, and each save's wait: the target is 0 failed saves,
each within a second. Then it times the refusal of a zip bomb (a 250 MB file packed into a few hundred KB) by the
importer, with its peak memory: the target is under 5 s and under 1 GB.

    python benchmarks/import_lock_bench.py [--rollouts 5000] [--saves 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from wmstudio.store import MadeBy, append_step, create_rollout, open_store, save_world_version
from wmstudio.studio.datasets import ExportRollout, ExportStep, export_dataset
from wmstudio.world.spec import Call, parse_world

STEP_TEXT = 5_000  # characters of one step's response: with its prompt rows a rollout is about 22 KB of JSONL


def big_dataset(folder: Path, rollouts: int) -> Path:
    world = parse_world({"name": "counter", "tools": [{"type": "function", "function": {
        "name": "bump", "description": "Add one to the counter",
        "parameters": {"type": "object", "properties": {"by": {"type": "integer"}}},
        "response": {"type": "object", "properties": {"value": {"type": "integer"}, "note": {"type": "string"}}}}}]})
    made_by = MadeBy.by_model("wmstudio-tiny", seed=0).to_json()
    note = "x" * STEP_TEXT
    made = [ExportRollout(id=str(i), world=world, title=f"run {i}", status="pending", tags=[],
                          steps=[ExportStep(Call("bump", {"by": k}), json.dumps({"value": i + k, "note": note}), None,
                                            made_by) for k in range(2)])
            for i in range(rollouts)]
    return export_dataset(made, folder, "big")


def timed_import(db: Path, source: Path, saves: int) -> dict:
    store = open_store(db)
    world = parse_world({"name": "studio", "tools": [{"type": "function", "function": {"name": "f"}}]})
    target = create_rollout(store, save_world_version(store, world).id, title="saved meanwhile")
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "curricula", "import", str(source), "--db",
                              str(db)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    waits, failed = [], 0
    time.sleep(1.0)  # the child loads and reads the rows before it writes
    for k in range(saves):
        begun = time.monotonic()
        try:
            append_step(store, target.id, Call("f", {"k": k}), "{}", MadeBy.by_hand("bench"))
            waits.append(time.monotonic() - begun)
        except Exception as err:  # noqa: BLE001 - "database is locked" is what is counted
            failed += 1
            print(f"save {k} failed after {time.monotonic() - begun:.1f} s: {err}", file=sys.stderr)
        time.sleep(0.25)
    out, err = child.communicate(timeout=3600)
    wall = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {"import_exit": child.returncode, "import_s": round(wall, 1), "import_peak_mb": round(peak),
            "saves": saves, "failed_saves": failed, "max_wait_s": round(max(waits, default=0), 3),
            "median_wait_s": round(sorted(waits)[len(waits) // 2], 3) if waits else None,
            "imported": _imported(out) or err.strip()[-300:]}


def _imported(out: str) -> str | None:
    """`N rollouts, M steps` from the import command's JSON, or None when it printed none."""
    try:
        data = json.loads(out)
        return f"{len(data['rollouts'])} rollouts, {data['steps']} steps"
    except (ValueError, KeyError, TypeError):
        return None


def zip_bomb(folder: Path) -> dict:
    bomb = folder / "bomb.zip"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as bundle:
        bundle.writestr("big/README.md", "---\npretty_name: big\n---\n")
        with bundle.open("big/data/train.jsonl", "w", force_zip64=True) as handle:
            line = b"{" + b" " * 1_000_000 + b"}\n"
            for _ in range(250):
                handle.write(line)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], "
                           "capture_output=True, text=True); print(r.returncode, resource.getrusage("
                           "resource.RUSAGE_CHILDREN).ru_maxrss // 1024); print(r.stderr[-300:])",
                           sys.executable, "-m", "wmstudio.cli", "curricula", "import", str(bomb), "--db",
                           str(folder / "bomb.db")], capture_output=True, text=True)
    code, peak = done.stdout.split("\n", 1)[0].split()
    return {"bomb_bytes": bomb.stat().st_size, "bomb_exit": int(code), "bomb_s": round(time.monotonic() - started, 2),
            "bomb_peak_mb": int(peak), "bomb_said": done.stdout.split("\n", 1)[1].strip()[-300:]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=5_000)
    parser.add_argument("--saves", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wmstudio-import-bench-") as scratch:
        folder = Path(scratch)
        source = big_dataset(folder / "big", args.rollouts)
        rows_mb = sum(p.stat().st_size for p in (source / "data").iterdir()) / 1e6
        result = {"rollouts": args.rollouts, "rows_mb": round(rows_mb, 1), **timed_import(folder / "studio.db", source,
                                                                                          args.saves)}
        result.update(zip_bomb(folder))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")


if __name__ == "__main__":
    main()
