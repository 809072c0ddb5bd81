"""Load on the world-model HTTP server: 50 concurrent world steps over loopback, with and without batching, and
how a shared forward's throughput grows with its batch.

For each mode it starts `wmstudio serve-wm` as a real process (fresh database, demo worlds seeded), warms it with
one request, then sends `--requests` POST /v1/world/step at once (plain httpx, one thread each; the calls cycle
through the demo worlds with a different seed each) and prints throughput, p50/p95 latency, failures and the
server's batch statistics. Then, in this process, it times one shared forward for 1..64 canvases (64 slots after
a ~400-token prompt each) to show up to what batch the forward's throughput grows on this CPU.

    python benchmarks/serve_load_bench.py [--requests 50] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serving import SIMULATE_CALLS, free_port, wait_for_http  # noqa: E402


def start_server(batching: bool, folder: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "WMSTUDIO_HOME": str(folder)}
    command = [sys.executable, "-m", "wmstudio.cli", "serve-wm", "--port", str(port), "--db", str(folder / "s.db"),
               "--batching", "on" if batching else "off"]
    server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_http(f"{url}/v1/health", process=server)
    except (RuntimeError, TimeoutError):
        server.kill()
        raise
    return server, url


def step_body(i: int) -> dict:
    world, tool, arguments = SIMULATE_CALLS[i % len(SIMULATE_CALLS)]
    return {"world": world, "call": {"name": tool, "arguments": json.loads(arguments)}}  # greedy, as trainers


def load(url: str, requests: int) -> dict:
    """`requests` world steps sent at once; throughput and latency over them."""
    httpx.post(f"{url}/v1/world/step", json=step_body(0), timeout=120).raise_for_status()  # warm-up

    def one(i: int) -> tuple[float, int]:
        started = time.perf_counter()
        reply = httpx.post(f"{url}/v1/world/step", json=step_body(i), timeout=600)
        return time.perf_counter() - started, reply.status_code

    started = time.perf_counter()
    with ThreadPoolExecutor(requests) as pool:
        results = list(pool.map(one, range(requests)))
    wall = time.perf_counter() - started
    latencies = sorted(seconds for seconds, _ in results)
    health = httpx.get(f"{url}/v1/health", timeout=10).json()
    return {"requests": requests, "ok": sum(code == 200 for _, code in results), "wall_s": round(wall, 2),
            "throughput_per_s": round(requests / wall, 2), "p50_s": round(statistics.median(latencies), 2),
            "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 2), "batches": health.get("batches")}


def forward_scaling(sizes=(1, 2, 4, 8, 16, 32, 64), prompt_tokens: int = 400, canvas_tokens: int = 64) -> list[dict]:
    """Canvases per second of one shared forward, by batch size (each canvas after its own prompt)."""
    import torch

    from wmstudio.model.serving.backends import load_backend
    from wmstudio.model.serving.batching import _Job, shared_forward

    backend = load_backend()
    generator = torch.Generator().manual_seed(0)
    rows = []
    for size in sizes:
        jobs = []
        for i in range(size):
            prompt = torch.randint(5, backend.vocab_size, (prompt_tokens - (i % 7),), generator=generator).tolist()
            jobs.append(_Job(torch.randint(5, backend.vocab_size, (1, canvas_tokens), generator=generator),
                             backend.encode_prompt(prompt)))
        shared_forward(backend, jobs + jobs[:1])  # warm-up (a batch of two or more takes the padded path)
        times = []
        for _ in range(5):
            started = time.perf_counter()
            shared_forward(backend, jobs)
            times.append(time.perf_counter() - started)
        best = statistics.median(times)
        rows.append({"batch": size, "forward_ms": round(best * 1000, 2), "canvases_per_s": round(size / best, 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {}
    for batching in (True, False):
        with tempfile.TemporaryDirectory() as folder:
            server, url = start_server(batching, Path(folder))
            try:
                report["with_batching" if batching else "without_batching"] = load(url, args.requests)
            finally:
                server.terminate()
                server.wait(30)
    report["forward_scaling"] = forward_scaling()
    if args.json:
        print(json.dumps(report, indent=2))
        return
    for name in ("with_batching", "without_batching"):
        row = report[name]
        print(f"{name:17s} {row['ok']}/{row['requests']} ok  {row['throughput_per_s']:.2f} req/s  "
              f"p50 {row['p50_s']:.2f} s  p95 {row['p95_s']:.2f} s  batches {row['batches']}")
    for row in report["forward_scaling"]:
        print(f"forward batch {row['batch']:3d}: {row['forward_ms']:8.2f} ms  {row['canvases_per_s']:8.1f} canvases/s")


if __name__ == "__main__":
    main()
