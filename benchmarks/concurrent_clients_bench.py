"""Fifty API clients run Simulate at once against one studio process: do all complete, and does the server's
memory come back afterwards?

Starts `wmstudio serve` as a real process on loopback with a fresh database, warms it with one run, then sends
`--clients` simulate requests at once (one `gradio_client` each) and prints completions, latency and the server's
resident memory (from /proc) before, at the peak, right after and `--idle` seconds after the load.

    python benchmarks/concurrent_clients_bench.py [--clients 50] [--idle 30] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gradio_client import Client

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serving import SIMULATE_CALLS, free_port, simulate_inputs  # noqa: E402

from wmstudio.store import list_worlds, open_store  # noqa: E402


def resident_mb(pid: int) -> float:
    """Resident memory of one process, in MB, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def wait_for(url: str, seconds: float = 180) -> None:
    started = time.time()
    while time.time() - started < seconds:
        try:
            Client(url, verbose=False)
            return
        except Exception:  # not up yet
            time.sleep(1)
    raise SystemExit(f"the studio at {url} did not come up in {seconds:.0f} s")


def world_ids(db: Path) -> dict[str, int]:
    """Saved world ids by name (the demo worlds the studio seeded on start)."""
    return {w.name: w.latest.id for w in list_worlds(open_store(db))}


def simulate(url: str, world_id: int, tool: str, arguments: str, seed: int) -> tuple[bool, float]:
    started = time.perf_counter()
    client = Client(url, verbose=False)
    status, *_ = client.submit(*simulate_inputs(world_id, tool, arguments, seed),
                               api_name="/simulate_run").result(timeout=600)
    return "Done:" in status, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--idle", type=float, default=30.0, help="Seconds to wait after the load before measuring.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="wmstudio-bench-"))
    db = home / "studio.db"
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    server = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "serve", "--port", str(port), "--db", str(db)],
                              env={**os.environ, "WMSTUDIO_HOME": str(home)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_for(url)
        worlds = world_ids(db)
        started_mb = resident_mb(server.pid)
        simulate(url, worlds["retail"], "get_order", SIMULATE_CALLS[0][2], 0)  # loads the model and its grammars
        before_mb = resident_mb(server.pid)
        peak, done = [before_mb], threading.Event()

        def watch() -> None:
            while not done.is_set():
                peak.append(resident_mb(server.pid))
                time.sleep(0.2)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        jobs = [(worlds[w], tool, arguments, seed) for seed, (w, tool, arguments) in
                enumerate((SIMULATE_CALLS * args.clients)[:args.clients])]
        load_started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=args.clients) as pool:
            results = list(pool.map(lambda job: simulate(url, *job), jobs))
        load_seconds = time.perf_counter() - load_started
        done.set()
        watcher.join()
        after_mb = resident_mb(server.pid)
        time.sleep(args.idle)
        idle_mb = resident_mb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)
    latencies = sorted(seconds for _, seconds in results)
    figures = {
        "clients": args.clients, "completed": sum(ok for ok, _ in results), "load_seconds": round(load_seconds, 1),
        "latency_p50_s": round(statistics.median(latencies), 2),
        "latency_p95_s": round(latencies[max(0, round(0.95 * len(latencies)) - 1)], 2),
        "memory_mb": {"started": round(started_mb), "before_load": round(before_mb), "peak": round(max(peak)),
                      "after_load": round(after_mb), f"after_{args.idle:g}s_idle": round(idle_mb)},
        "returned_within_20_percent": idle_mb <= 1.2 * before_mb,
    }
    if args.json:
        print(json.dumps(figures))
        return
    memory = figures["memory_mb"]
    print(f"{figures['completed']}/{args.clients} clients completed in {figures['load_seconds']} s; latency p50 "
          f"{figures['latency_p50_s']} s, p95 {figures['latency_p95_s']} s")
    print("server memory (MB): " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in memory.items()))
    print(f"back within 20% of the level before the load: {figures['returned_within_20_percent']}")


if __name__ == "__main__":
    main()
