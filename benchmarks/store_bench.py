"""Store benchmark: a database with 100k steps and 50k ratings, then the two hot queries timed through the store API.

Prints median and p95 milliseconds for several rollout filters and for fetching the next step to annotate
(target: each <= 100 ms). Run: `python benchmarks/store_bench.py [--steps N] [--ratings N] [--db PATH]`."""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

from wmstudio.model.denoising.trace import Commit, DecodeTrace
from wmstudio.store import (
    FAILURE_TAGS,
    MadeBy,
    Store,
    append_step,
    filter_rollouts,
    get_annotator,
    next_to_annotate,
    open_store,
    pack_trace,
    refresh_search_index,
    save_rating,
    save_world_version,
)
from wmstudio.store.text_index import STALE_BATCH
from wmstudio.world.spec import Call, parse_world

TOOLS = ("get_order", "refund_order", "search_products", "list_invoices", "create_ticket", "get_weather")
TAGS = ("adversarial", "error-path", "pagination", "long-output", "happy-path", "needs-review")
WORDS = ("shipped", "pending", "refunded", "cancelled", "delivered", "backorder", "in_transit", "lost")


def build(store: Store, steps: int, ratings: int, annotators: int, seed: int = 0) -> dict[str, int]:
    """Fill the store: worlds through the API, then rollouts, steps and ratings bulk-inserted in one transaction."""
    rng = random.Random(seed)
    world_ids = []
    for name in ("shop", "bank", "travel", "weather", "support"):
        for version in range(2):
            spec = parse_world({"name": name, "task": f"{name} task v{version}", "tools": [
                {"type": "function", "function": {"name": tool, "description": tool, "parameters": {
                    "type": "object", "properties": {"id": {"type": "string"}}}}} for tool in TOOLS]})
            world_ids.append(save_world_version(store, spec).id)
    annotator_ids = [get_annotator(store, f"annotator-{i}").id for i in range(annotators)]

    start = datetime(2026, 1, 1, tzinfo=UTC)
    trace = pack_trace(DecodeTrace([Commit(position, position // 4, 0.5) for position in range(64)]))  # a 64-token response
    rollout_rows, tag_rows, step_rows, trace_rows = [], [], [], []
    step_id, rollout_id, clock = 0, 0, 0
    originals: list[int] = []
    while step_id < steps:
        rollout_id += 1
        length = rng.randint(10, 56)
        parent = rng.random() < 0.1 and rollout_id > 1
        created = start + timedelta(seconds=clock)
        rollout_rows.append((rollout_id, rng.choice(world_ids), f"rollout {rollout_id} {rng.choice(WORDS)}",
                             rng.choice(("pending", "pending", "accepted", "rejected")),
                             rollout_id - 1 if parent else None, 3 if parent else None, _sql_time(created)))
        tag_rows += [(rollout_id, tag) for tag in rng.sample(TAGS, rng.randint(0, 2))]
        made_by = json.dumps(MadeBy.by_model("wmstudio-tiny", {"steps": 12, "strategy": "low_confidence"},
                                             seed=rng.randint(0, 10**6)).to_json())
        for index in range(min(length, steps - step_id)):
            step_id += 1
            clock += 1
            copied = parent and index <= 3 and step_id - length > 0
            order = f"ORD-{rng.randint(0, 99999):05d}"
            call = {"name": rng.choice(TOOLS), "arguments": {"id": order, "page": rng.randint(1, 9)}}
            response = {"id": order, "status": rng.choice(WORDS), "amount": round(rng.uniform(1, 900), 2),
                        "items": [{"sku": f"SKU-{rng.randint(0, 9999)}", "qty": rng.randint(1, 5)}
                                  for _ in range(rng.randint(1, 4))],
                        "note": " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))}
            ok = rng.choices((1, 0, None), (8, 1, 1))[0]
            report = None if ok is None else json.dumps({"ok": bool(ok), "json_valid": True, "schema_errors": [],
                                                         "rule_violations": [], "anchor_violations": []})
            step_rows.append((step_id, rollout_id, index, json.dumps(call), json.dumps(response), made_by, report, ok,
                              step_id - length if copied else None, 0, _sql_time(start + timedelta(seconds=clock))))
            trace_rows.append((step_id, trace))
            if not copied:
                originals.append(step_id)

    rating_rows, counts = [], {}
    pool = originals[: max(1, len(originals) * 2 // 3)]
    per_annotator = ratings // annotators
    now = _sql_time(start + timedelta(seconds=clock))
    for annotator_id in annotator_ids:
        for sid in rng.sample(pool, min(per_annotator, len(pool))):
            tags = json.dumps(rng.sample(FAILURE_TAGS, rng.randint(0, 1)))
            rating_rows.append((sid, annotator_id, rng.randint(1, 5), rng.randint(1, 5), rng.randint(1, 5), tags,
                                "", now, now))
            counts[sid] = counts.get(sid, 0) + 1

    with closing(sqlite3.connect(store.path)) as connection:
        with connection:
            connection.executemany("INSERT INTO rollout VALUES (?, ?, ?, ?, ?, ?, ?)", rollout_rows)
            connection.executemany("INSERT INTO rollout_tag VALUES (?, ?)", tag_rows)
            connection.executemany(
                'INSERT INTO step (id, rollout_id, "index", call, response, made_by, check_report, check_ok, '
                "copied_from_step_id, rating_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", step_rows)
            connection.executemany("INSERT INTO step_trace VALUES (?, ?)", trace_rows)
            connection.executemany(
                "INSERT INTO rating (step_id, annotator_id, realism, outcome_correctness, training_utility, "
                "failure_tags, note, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rating_rows)
            connection.executemany("UPDATE step SET rating_count = ? WHERE id = ?",
                                   [(n, sid) for sid, n in counts.items()])
        connection.execute("ANALYZE")
    return {"rollouts": len(rollout_rows), "steps": len(step_rows), "ratings": len(rating_rows),
            "annotators": len(annotator_ids)}


def _sql_time(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")  # how SQLAlchemy stores DATETIME in SQLite


def timed(label: str, run: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median and p95 milliseconds of `repeat` calls (after one warm-up call)."""
    run()
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        samples.append((time.perf_counter() - began) * 1000)
    samples.sort()
    median = statistics.median(samples)
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    print(f"  {label:<48} median {median:7.2f} ms   p95 {p95:7.2f} ms")
    return median, p95


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--ratings", type=int, default=50_000)
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--db", type=Path, default=None,
                        help="database file (default: a temporary folder); an existing one with steps is reused")
    args = parser.parse_args()

    folder = None if args.db else tempfile.TemporaryDirectory()
    path = args.db or Path(folder.name) / "bench.db"
    began = time.perf_counter()
    reuse = path.exists() and path.stat().st_size > 0
    store = open_store(path)
    if reuse:
        with closing(sqlite3.connect(path)) as connection:
            sizes = {table: connection.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("rollout", "step", "rating", "annotator")}
        print(f"reusing {path}: {sizes}")
    else:
        sizes = build(store, args.steps, args.ratings, args.annotators)
        print(f"built {sizes} in {time.perf_counter() - began:.1f} s")
        began = time.perf_counter()
        indexed = refresh_search_index(store)  # what the first text search after a bulk load does
        print(f"indexed the text of {indexed} rollouts in {time.perf_counter() - began:.1f} s "
              f"({path.stat().st_size / 1e6:.0f} MB in all)")

    slowest = 0.0
    print("filter rollouts (page of 20, newest first, with total and status counts):")
    cases = {
        "no filter": {},
        "world name": {"world": "shop"},
        "status accepted": {"status": "accepted"},
        "tag": {"tag": "pagination"},
        "text, rare (an order id prefix)": {"text": "ORD-0424"},
        "text, common word (most steps)": {"text": "backorder"},
        "text, 2 characters (scan)": {"text": "zq"},
        "checks failed": {"check_ok": False},
        "checks ok": {"check_ok": True},
        "world + status + checks failed": {"world": "bank", "status": "pending", "check_ok": False},
        "world + tag + text": {"world": "travel", "tag": "adversarial", "text": "refunded"},
        "no filter, page 50": {"page": 50},
    }
    for label, filters in cases.items():
        _, p95 = timed(label, lambda f=filters: filter_rollouts(store, **f), args.repeat)
        slowest = max(slowest, p95)

    print("next item to annotate:")
    fresh = get_annotator(store, "newcomer")  # no ratings yet
    for label, annotator_id in (("annotator with ~6k ratings", 1), ("annotator with none", fresh.id)):
        _, p95 = timed(label, lambda a=annotator_id: next_to_annotate(store, a), args.repeat)
        slowest = max(slowest, p95)
    print(f"slowest p95 of the reads: {slowest:.1f} ms (target <= 100 ms)")

    print("writes, for reference (one short transaction each):")
    rollout_id = filter_rollouts(store, page_size=1).items[0].id
    timed("append a step (with trace and check report)", lambda: append_step(
        store, rollout_id, Call("get_order", {"id": "ORD-1"}), '{"status": "shipped"}',
        MadeBy.by_model("wmstudio-tiny", {"steps": 12}, seed=1), {"ok": True}, DecodeTrace([Commit(p, 0, 0.5) for p in range(64)])), args.repeat)
    queue = [next_to_annotate(store, fresh.id).step_id]
    def rate_next() -> None:
        save_rating(store, fresh.id, queue[-1], 4, 4, 4, ["other"])
        queue.append(next_to_annotate(store, fresh.id).step_id)
    timed("save a rating, then fetch the next item", rate_next, args.repeat)

    def append_then_search() -> None:
        append_step(store, rollout_id, Call("get_order", {"id": "ORD-2"}), '{"status": "lost"}',
                    MadeBy.by_hand())
        filter_rollouts(store, text="ORD-0424")
    timed("append a step, then search text (it is scanned)", append_then_search, args.repeat)

    batch = [item.id for item in filter_rollouts(store, page_size=STALE_BATCH, page=3).items]
    samples = []
    for _ in range(max(3, args.repeat // 8)):
        for rollout in batch:
            append_step(store, rollout, Call("get_order", {"id": "ORD-3"}), "{}", MadeBy.by_hand())
        began = time.perf_counter()
        refresh_search_index(store)
        samples.append((time.perf_counter() - began) * 1000)
    print(f"  {'re-index a batch of ' + str(STALE_BATCH) + ' changed rollouts':<48} "
          f"median {statistics.median(samples):7.2f} ms   max {max(samples):7.2f} ms")
    if folder is not None:
        store.close()
        folder.cleanup()


if __name__ == "__main__":
    main()
