"""The request budget of the world-model HTTP server (issue 29): how fast each costly body is answered, and how fast a
normal request sent while it is being handled is answered.

It starts `wmstudio serve-wm` as a real process (fresh database, demo worlds seeded), warms it with one normal world
step (retail `get_order`), times that request alone, then for each costly body sends it and, 0.2 s later, the
normal request, and prints each one's status and seconds. The bodies: 20 distinct CEL rules of 4,000 characters
each that would each run their 2-second budget, three short rules that each would run 2 s (under the request's
shared 2-second budget for checks), twenty legal rules of 886 characters that take a second to parse and to check
(their compiling counts against that budget too), a 7.1 MB initial state, a 7.1 MB `state`, a tool schema of `$ref`/`anyOf`
4 branches x 10 levels, and a body nested 10,000 deep. Targets: each costly body answered (a 4xx naming the
limit) within 5 s, the normal request within 3 s.

    python benchmarks/serve_budget_bench.py [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serving import free_port, wait_for_http  # noqa: E402

from wmstudio.store.seeding import demo_worlds  # noqa: E402

NORMAL = {"world": "retail", "call": {"name": "get_order", "arguments": {"order_id": "ORD-23411"}}}
JSON = {"content-type": "application/json"}


def costly_bodies() -> dict[str, bytes]:
    """Name -> the body as sent."""
    retail = next(world for world in demo_worlds() if world.name == "retail").to_json()
    nested = "[" + ",".join(str(i) for i in range(60)) + "]"

    def rules(count: int, size: int) -> list[dict]:
        made = []
        for k in range(count):
            check = f"{nested}.all(a, {nested}.all(b, {nested}.all(c, a + b + c >= {k})))"
            made.append({"text": f"rule {k}", "check": check + " || true" * max(0, (size - len(check)) // 8)})
        return made

    def slow_to_parse(count: int) -> list[dict]:  # 17,720 characters in all: within the limits, a second to parse
        group = "(" * 25 + "response.status == 'ok' || {k} > 0" + ")" * 25
        loops = f"{nested}.all(a, {nested}.all(b, a + b >= 0))"  # and a tenth of a second or so to check
        return [{"text": f"rule {k}", "check": " && ".join([loops, *[group.format(k=k)] * 6])} for k in range(count)]

    orders = [{**retail["initial_state"]["orders"][0], "id": f"ORD-{i:06d}"} for i in range(24_000)]
    state = {**retail["initial_state"], "orders": orders}
    defs = {f"n{level}": {"anyOf": [{"anyOf": [{"$ref": f"#/$defs/n{level + 1}"}], "title": f"b{branch}"}
                                    for branch in range(4)]} for level in range(9)}
    defs["n9"] = {"anyOf": [{"type": "string"}] * 4}
    bomb = {"name": "bomb", "parameters": {"type": "object", "properties": {"a": {"$ref": "#/$defs/n0"}},
                                           "$defs": defs}}
    bodies = {
        "20 rules x 4,000 chars": {**NORMAL, "world": {**retail, "rules": rules(20, 4_000)}},
        "3 rules x 2 s each": {**NORMAL, "world": {**retail, "rules": rules(3, 0)}},
        "20 legal rules, slow to parse": {**NORMAL, "world": {**retail, "rules": slow_to_parse(20)}},
        "7.1 MB initial_state": {**NORMAL, "world": {**retail, "initial_state": state}},
        "7.1 MB state": {**NORMAL, "state": state},
        "$ref/anyOf 4x10 schema": {"world": {"name": "bomb", "tools": [bomb]},
                                   "call": {"name": "bomb", "arguments": {"a": 0}}},
    }
    encoded = {name: json.dumps(body).encode() for name, body in bodies.items()}
    encoded["nested 10,000 deep"] = b"[" * 10_000 + b"]" * 10_000
    return encoded


def timed(url: str, body: bytes) -> tuple[int, float, str]:
    started = time.perf_counter()
    reply = httpx.post(f"{url}/v1/world/step", content=body, headers=JSON, timeout=600)
    why = reply.json()["detail"][0]["msg"][:70] if reply.status_code >= 400 else ""
    return reply.status_code, time.perf_counter() - started, why


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        env = {**os.environ, "WMSTUDIO_HOME": folder}
        server = subprocess.Popen([sys.executable, "-m", "wmstudio.cli", "serve-wm", "--port", str(port), "--db",
                                   str(Path(folder) / "s.db")], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_http(f"{url}/v1/health", process=server)
            normal = json.dumps(NORMAL).encode()
            timed(url, normal)  # warm-up
            alone = timed(url, normal)
            rows = []
            for name, body in costly_bodies().items():
                beside: list[tuple[int, float, str]] = []
                thread = threading.Thread(target=lambda: (time.sleep(0.2), beside.append(timed(url, normal))))
                thread.start()
                costly = timed(url, body)
                thread.join()
                rows.append({"body": name, "bytes": len(body), "status": costly[0], "seconds": round(costly[1], 2),
                             "answer": costly[2], "normal_status": beside[0][0],
                             "normal_seconds": round(beside[0][1], 2)})
        finally:
            server.terminate()
            server.wait(30)
    if args.json:
        print(json.dumps({"normal_alone_seconds": round(alone[1], 2), "bodies": rows}, indent=2))
        return
    print(f"normal request alone: {alone[0]} in {alone[1]:.2f} s")
    print(f"{'body':<26}{'bytes':>11}{'status':>8}{'s':>7}{'normal':>8}{'s':>7}  answer")
    for row in rows:
        print(f"{row['body']:<26}{row['bytes']:>11,}{row['status']:>8}{row['seconds']:>7.2f}{row['normal_status']:>8}"
              f"{row['normal_seconds']:>7.2f}  {row['answer']}")


if __name__ == "__main__":
    main()
