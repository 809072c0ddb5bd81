"""Hostile-input benchmark: each input of issue 13 through the real `wmstudio` command, in a process of its own,
with its exit code, wall time and peak memory (RSS), beside a valid input for the interpreter's own cost.

Target: exit 2 with a message, under 20 s and 3 GB each; the YAML alias bomb and the 1 MB rule refused in under a
second of their own (their time minus the valid run's).
Run: `python benchmarks/hostile_inputs_bench.py [--only NAME]`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "assets" / "examples"
WORLD, CALL, RESPONSE = (str(EXAMPLES / name) for name in ("refund-world.json", "refund-call.json",
                                                           "coherent-response.json"))
DEEP = "[" * 10_000 + "]" * 10_000
TEN = "[1,2,3,4,5,6,7,8,9,10]"


def world_with(**fields) -> str:
    return json.dumps({**json.loads(Path(WORLD).read_text()), **fields})


def inputs(folder: Path) -> dict[str, list[str]]:
    """name -> argv, with the files they read written into `folder`."""
    files = {
        "deep.json": DEEP,
        "big-int.json": world_with(initial_state={"n": "N"}).replace('"N"', "9" * 5_000),
        "nan.json": world_with(initial_state={"n": "N"}).replace('"N"', "NaN"),
        "surrogate.json": world_with(task="refund \ud800 now"),
        "deep-response.json": "[" * 900 + "]" * 900,
        "bomb.yaml": "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
            f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True)),
        "rule-1mb.json": world_with(rules=[{"text": "r", "check": "response.status != 'x' && " * 40_000 + "true"}]),
        "rule-nested-all.json": world_with(rules=[{"text": "slow", "check": f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, "
                                                                            f"{TEN}.all(d, {TEN}.all(e, a + b + c + d "
                                                                            "+ e > 0)))))"}]),
        "dashes.yaml": "- " * 500_000 + "x\n",
        "file.txt": "x",
    }
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8", errors="surrogatepass")
    f = str(folder)
    return {
        "valid world (baseline)": ["validate", WORLD],
        "validate 10,000-deep JSON": ["validate", f"{f}/deep.json"],
        "validate 5,000-digit integer": ["validate", f"{f}/big-int.json"],
        "validate NaN": ["validate", f"{f}/nan.json"],
        "validate lone surrogate": ["validate", f"{f}/surrogate.json"],
        "prompt lone surrogate": ["prompt", f"{f}/surrogate.json", "--call", CALL],
        "validate /dev/zero": ["validate", "/dev/zero"],
        "tools import /dev/zero": ["tools", "import", "/dev/zero"],
        "history import /dev/zero": ["history", "import", "/dev/zero"],
        "tools import YAML alias bomb": ["tools", "import", f"{f}/bomb.yaml"],
        "tools import 500,000-deep YAML": ["tools", "import", f"{f}/dashes.yaml"],
        "tools import 10,000-deep JSON": ["tools", "import", f"{f}/deep.json"],
        "validate 1 MB CEL rule": ["validate", f"{f}/rule-1mb.json"],
        "check nested .all() rule (exit 1)": ["check", f"{f}/rule-nested-all.json", "--call", CALL, "--response",
                                              RESPONSE],
        "check --call 10,000-deep": ["check", WORLD, "--call", f"{f}/deep.json", "--response", RESPONSE],
        "check --response 900-deep": ["check", WORLD, "--call", CALL, "--response", f"{f}/deep-response.json"],
        "check --response a folder": ["check", WORLD, "--call", CALL, "--response", f],
        "check --response /dev/zero": ["check", WORLD, "--call", CALL, "--response", "/dev/zero"],
        "check --anchor 10,000-deep": ["check", WORLD, "--call", CALL, "--response", RESPONSE, "--anchor",
                                       "status=" + DEEP],
        "prompt --history 10,000-deep": ["prompt", WORLD, "--call", CALL, "--history", f"{f}/deep.json"],
        "tools import -o a folder": ["tools", "import", f"{f}/bomb.yaml", "-o", f],
        "history import -o under a file": ["history", "import", CALL, "-o", f"{f}/file.txt/out.json"],
        "serve --host 0.0.0.0": ["serve", "--host", "0.0.0.0"],
    }


def measure(argv: list[str]) -> tuple[int, float, float, str]:
    """(exit code, wall seconds, peak RSS in MB, first line of stderr) of one `wmstudio` run."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", *argv], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, cwd=ROOT)
    stderr = child.stderr.read().decode("utf-8", errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    line = stderr.strip().splitlines()[0] if stderr.strip() else ""
    if "Traceback" in stderr:
        line = "TRACEBACK: " + stderr.strip().splitlines()[-1]
    return child.returncode, seconds, usage.ru_maxrss / 1024, line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="Run only the inputs whose name contains this text.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wmstudio-hostile-") as folder:
        cases = inputs(Path(folder))
        print(f"{'input':<36} {'exit':>4} {'s':>6} {'MB':>7}  message")
        for name, argv in cases.items():
            if args.only and args.only not in name and "baseline" not in name:
                continue
            code, seconds, rss, line = measure(argv)
            print(f"{name:<36} {code:>4} {seconds:>6.2f} {rss:>7.0f}  {line[:110]}")


if __name__ == "__main__":
    main()
