"""Keep the response schemas a world model's training rows laid out beside its checkpoint.

`train-wm` writes them after the denoiser, from the same training rows; `wmstudio keep-schemas` writes them for a
model already trained. Only rows that name a simulated world (`meta`) count: their world says the tool's schema and
arguments, so another world's tool of the same name is told apart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from wmstudio.model.network.trained_schemas import TrainedSchemas
from wmstudio.train.world_model.examples import CorpusRow, request_from_meta


def write_trained_schemas(rows: list[CorpusRow], out: Path, corpus: str = "") -> dict[str, Any] | None:
    """Keep the schemas of `rows` in `out`; what was kept (rows, tools, seconds, `corpus`), or None and nothing saved
    when no row names a world whose called tool has a response schema."""
    started = time.perf_counter()
    built: dict[tuple[Any, Any], Any] = {}  # one world rebuilt per simulator and tool: the schema is the tool's

    def calls() -> Iterator[tuple[Any, Any]]:
        for row in rows:
            if not row.meta:
                continue
            call = row.meta.get("call")
            key = row.meta.get("world"), call.get("name") if isinstance(call, dict) else None
            if key not in built:
                request = request_from_meta(row.meta, row.where)
                built[key] = request.world, request.call
            yield built[key]

    schemas = TrainedSchemas.fit(calls())
    if not len(schemas):
        return None
    fitted = {"rows": sum(kept["rows"] for kept in schemas.schemas.values()), "tools": len(schemas),
              "corpus": corpus, "seconds": round(time.perf_counter() - started, 1)}
    schemas.save(out, fitted)
    return fitted
