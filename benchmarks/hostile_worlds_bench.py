"""No request may stop the server (issue 52): the named attacks and N generated hostile worlds sent to a real
`wmstudio serve-wm` process, one at a time, while a second client probes `/health` every 0.25 s and sends a normal
world step (retail `get_order`) every 2 s.

Each body is sent twice: alone, recording its status and the server's CPU seconds (from /proc), then beside the
probes (its rules compiled by then), recording the slowest `/health` and normal step answered meanwhile and which
requests a `/health` over 0.5 s overlapped. Prints the named cases one
a line, then for the generated worlds: statuses, 5xx count, CPU per request (median, p99, max), the slowest
`/health` and normal step, and the server's resident memory before and after. Targets: 0 x 5xx, no request over
3 s of CPU, `/health` within 1 s and a normal step within 3 s throughout.

    python benchmarks/hostile_worlds_bench.py [--worlds 1000] [--seed 52] [--json] [--failures FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from hostile_worlds import (  # noqa: E402
    NORMAL_STEP,
    Prober,
    cpu_seconds,
    hostile_world_body,
    named_attacks,
    resident_mb,
    retail,
)
from serving import free_port, wait_for_http  # noqa: E402


def send(client: httpx.Client, pid: int, body: dict) -> tuple[int, float, str]:
    """(status, server CPU seconds, the answer's first characters) of one world step."""
    before = cpu_seconds(pid)
    try:
        reply = client.post("/v1/world/step", json=body)
    except httpx.TimeoutException:
        return 0, cpu_seconds(pid) - before, "no answer within the client's timeout"
    return reply.status_code, cpu_seconds(pid) - before, reply.text[:160]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=52)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--failures", help="write every failing body here (JSON), to replay them")
    args = parser.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        log = open(f"{folder}/server.log", "w+")  # a file: a pipe nobody reads would stop the server when full
        server = subprocess.Popen(["wmstudio", "serve-wm", "--port", str(port), "--db", f"{folder}/studio.db"],
                                  stdout=subprocess.DEVNULL, stderr=log, text=True)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_http(f"{url}/v1/health", process=server)
            with httpx.Client(base_url=url, timeout=60) as client:
                client.post("/v1/world/step", json=NORMAL_STEP)  # warm
                memory_before = resident_mb(server.pid)
                named = {}
                for name, (body, _) in named_attacks().items():
                    status, cpu, text = send(client, server.pid, body)  # alone: the request's own CPU
                    with Prober(url) as probe:  # again, with a second client probing (its rules compiled now)
                        send(client, server.pid, body)
                    named[name] = {"status": status, "cpu_s": round(cpu, 2), "health_max_s":
                                   round(max(probe.health, default=0), 3), "step_max_s": round(max(probe.steps,
                                                                                                     default=0), 2)}
                    if not args.json:
                        print(f"{name:40s} {status} cpu {cpu:5.2f} s  /health max {named[name]['health_max_s']:.3f} s"
                              f"  normal step max {named[name]['step_max_s']:.2f} s", flush=True)
                rng, base = random.Random(args.seed), retail()
                bodies = [hostile_world_body(rng, base) for _ in range(args.worlds)]
                statuses, cpus, failures = {}, [], []
                started = time.monotonic()
                for index, body in enumerate(bodies):  # alone: each request's own CPU
                    status, cpu, text = send(client, server.pid, body)
                    statuses[status] = statuses.get(status, 0) + 1
                    cpus.append(cpu)
                    if status >= 500 or status == 0 or cpu > 3:
                        failures.append({"index": index, "status": status, "cpu_s": round(cpu, 2),
                                         "answer": text, "body": json.dumps(body)})
                spans = []
                with Prober(url) as probe:  # again, beside the probes (their rules compiled by now)
                    for index, body in enumerate(bodies):
                        sent = time.monotonic()
                        status, _, text = send(client, server.pid, body)
                        spans.append((sent, time.monotonic(), index, body))
                        if status >= 500 or status == 0:
                            failures.append({"index": index, "status": status, "cpu_s": None, "answer": text,
                                             "body": json.dumps(body)})
                memory_after = resident_mb(server.pid)
                for began, ended in probe.slow:  # the requests a slow /health overlapped
                    for sent, done, index, body in spans:
                        if sent < ended and done > began:
                            failures.append({"index": index, "status": "slow /health", "cpu_s": None,
                                             "answer": f"/health took {ended - began:.2f} s meanwhile",
                                             "body": json.dumps(body)})
            cpus.sort()
            generated = {"worlds": args.worlds, "seed": args.seed, "statuses": statuses,
                         "server_errors": sum(n for s, n in statuses.items() if s >= 500),
                         "unanswered": statuses.get(0, 0),
                         "cpu_median_s": round(statistics.median(cpus), 3),
                         "cpu_p99_s": round(cpus[int(0.99 * (len(cpus) - 1))], 3), "cpu_max_s": round(cpus[-1], 3),
                         "over_3_cpu_s": sum(c > 3 for c in cpus), "health_max_s": round(max(probe.health), 3),
                         "normal_step_max_s": round(max(probe.steps), 2), "minutes": round(
                             (time.monotonic() - started) / 60, 1), "rss_mb_before": round(memory_before),
                         "rss_mb_after": round(memory_after), "failures": failures}
        finally:
            server.terminate()
            server.wait(timeout=30)
            log.seek(0)
            stderr = log.read()
            log.close()
    generated["tracebacks_in_log"] = stderr.count("Traceback")
    shown = {**generated, "failures": [{**f, "body": f["body"][:300]} for f in generated["failures"][:10]]}
    if args.failures:
        Path(args.failures).write_text(json.dumps(generated["failures"], indent=1))
    if args.json:
        print(json.dumps({"named": named, "generated": shown}, indent=1))
    else:
        print(json.dumps(shown, indent=1))


if __name__ == "__main__":
    main()
