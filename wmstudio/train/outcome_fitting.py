"""Fit a world model's outcome head on a corpus and save it beside the checkpoint.

`train-wm` fits it after the denoiser, on the same training rows; `wmstudio fit-outcome` fits one for a model
already trained. Only rows that name a simulated world (`meta`) teach it: it reads the state, the call and the
history those rows rebuild."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from wmstudio.model.outcome_head import OutcomeHead
from wmstudio.train.examples import CorpusRow, request_from_meta
from wmstudio.train.field_kinds import parse


def fit_outcome_head(rows: list[CorpusRow], out: Path, seed: int = 0, corpus: str = "") -> dict[str, Any] | None:
    """Fit the head on `rows` and save it in `out`; what the fit saw (with `corpus`, where the rows came from, and
    its seconds), or None and nothing saved when no row teaches an outcome. Each row's facts read the state its
    prompt showed (its grounding)."""
    started = time.perf_counter()
    examples = []
    for row in rows:
        if not row.meta:
            continue
        request = request_from_meta(row.meta, row.where)
        examples.append((request.world, request.call, request.history, parse(row.response_text), request.grounding))
    head, fitted = OutcomeHead.fit(examples, seed=seed)
    if not fitted["rows"]:
        return None
    fitted.update(corpus=Path(corpus).name if corpus else "", seconds=round(time.perf_counter() - started, 1))
    head.save(out, fitted)
    return fitted
