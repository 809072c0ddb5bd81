"""Fit a world model's outcome head (and the messages it writes to an outcome) on a corpus and save them beside the
checkpoint.

`train-wm` fits them after the denoiser, on the same training rows; `wmstudio model fit-outcome` fits them for a
model already trained (`--messages-only`: the message templates alone, the head's weights kept). Only rows that
name a simulated world (`meta`) teach them: they read the state, the call and the history those rows rebuild."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from wmstudio.model.heads.outcome_head import OutcomeHead
from wmstudio.model.heads.outcome_messages import fit_outcome_messages
from wmstudio.train.world_model.examples import CorpusRow, request_from_meta
from wmstudio.train.world_model.field_kinds import parse


def fit_outcome_head(rows: list[CorpusRow], out: Path, seed: int = 0, corpus: str = "") -> dict[str, Any] | None:
    """Fit the head on `rows` and save it in `out`; what the fit saw (with `corpus`, where the rows came from, and
    its seconds), or None and nothing saved when no row teaches an outcome. Each row's facts read the state its
    prompt showed (its grounding)."""
    started = time.perf_counter()
    examples = outcome_examples(rows)
    head, fitted = OutcomeHead.fit(examples, seed=seed)
    if not fitted["rows"]:
        return None
    fitted.update(corpus=Path(corpus).name if corpus else "", seconds=round(time.perf_counter() - started, 1))
    head.save(out, fitted)
    fitted["messages"] = fit_outcome_messages(examples, out, corpus)
    return fitted


def fit_messages(rows: list[CorpusRow], out: Path, corpus: str = "") -> dict[str, Any]:
    """Fit only the message templates on `rows` and save them in `out` (the head's weights are left as they are)."""
    return fit_outcome_messages(outcome_examples(rows), out, corpus)


def outcome_examples(rows: list[CorpusRow]) -> list[tuple]:
    """(world, call, history, response value, grounding) of each row that names a simulated world."""
    examples = []
    for row in rows:
        if not row.meta:
            continue
        request = request_from_meta(row.meta, row.where)
        examples.append((request.world, request.call, request.history, parse(row.response_text), request.grounding))
    return examples
