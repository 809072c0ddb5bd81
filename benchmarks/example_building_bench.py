"""Benchmark of train-wm's data preparation: milliseconds per corpus row to build training examples (prompt rendered
within its token budget, skeleton and free canvases, copy-head targets), in one process.

Every `train-wm` run pays this before its first step (16,000 rows at 20 ms a row: 320 s, shared among its worker
processes), and on a lent GPU it is time the accelerator waits. Writes a corpus of --rows rows when none is given.
Run: `python benchmarks/example_building_bench.py [--corpus DIR] [--rows 300] [--model PATH] [--repeats 3]`."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer

from wmstudio.locations import DEFAULT_MODEL
from wmstudio.train.world_model.examples import build_examples, read_corpus_split
from wmstudio.world.corpus.rows import write_corpus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a corpus folder (default: a fresh one of --rows rows)")
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="the tokenizer's model folder")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        corpus = args.corpus
        if corpus is None:
            corpus = Path(scratch) / "corpus"
            write_corpus(corpus, rows=int(args.rows / 0.8) + 1, seed=7)
        rows = read_corpus_split(corpus, "train", args.rows)
        tokenizer = AutoTokenizer.from_pretrained(args.model)
        times = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            built = build_examples(rows, tokenizer, "mdlm", 3072, 768, seed=0, copy=True, workers=1)
            times.append((time.perf_counter() - started) / len(rows) * 1000)
    print(f"{len(rows)} rows, {len(built.examples)} examples, {built.copy_spans:,} copy spans: "
          f"median {statistics.median(times):.1f} ms a row (min {min(times):.1f}, max {max(times):.1f}) "
          f"over {args.repeats} runs, one process")


if __name__ == "__main__":
    main()
