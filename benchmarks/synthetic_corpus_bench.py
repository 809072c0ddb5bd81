"""Synthetic-world benchmark: how long generating N worlds and a mixed corpus over them take, and how big it is.

Prints world generation (ms per world, built fresh), then the corpus (`wmstudio corpus --rows R --synthetic N`):
wall and CPU seconds, rows per CPU second, bytes per row and the split counts (target: 20,000 rows over 300
worlds in a few minutes on 2 cores). Run: `python benchmarks/synthetic_corpus_bench.py [--rows R] [--synthetic N]`."""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from wmstudio.world.corpus.rows import write_corpus
from wmstudio.world.synth.generate import generate_blueprint
from wmstudio.world.synth.simulator import SyntheticSimulator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--synthetic", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    started = time.perf_counter()
    worlds = [SyntheticSimulator(generate_blueprint(args.seed, i)).world() for i in range(args.synthetic)]
    per_world = (time.perf_counter() - started) / args.synthetic * 1000
    tools = sum(len(w.tools) for w in worlds) / len(worlds)
    print(f"worlds: {args.synthetic} generated, {per_world:.1f} ms each, {tools:.1f} tools each")

    with tempfile.TemporaryDirectory() as folder:
        wall, cpu = time.perf_counter(), time.process_time()
        stats = write_corpus(Path(folder), rows=args.rows, seed=args.seed, synthetic=args.synthetic,
                             synthetic_seed=args.seed)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = sum(p.stat().st_size for p in Path(folder).glob("*.jsonl"))
    print(f"corpus: {args.rows:,} rows ({stats['worlds'].get('synthetic', 0):,} synthetic) in {wall:.1f} s wall, "
          f"{cpu:.1f} s CPU ({args.rows / cpu:.0f} rows per CPU second), {size / 1e6:.0f} MB "
          f"({size / args.rows / 1000:.1f} kB a row)")
    print(json.dumps({"splits": stats["splits"], "synthetic_worlds": stats["synthetic_worlds"],
                      "error_responses": stats["error_responses"], "oracle_grounding": stats["oracle_grounding"]}))


if __name__ == "__main__":
    main()
