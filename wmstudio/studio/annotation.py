"""Annotation behind the Annotate tab: the annotators' agreement, computed once for everyone who asks.

Krippendorff's alpha over every rating takes seconds at 50k ratings, so calls that arrive while one computation
runs wait for it and share its result."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmstudio.metrics.agreement import AgreementReport, agreement_report
from wmstudio.store import (  # noqa: F401 - re-exported: the Annotate tab's door to the store
    FAILURE_TAGS,
    RATING_DIMENSIONS,
    AnnotationItem,
    Store,
    annotator_progress,
    get_annotator,
    next_to_annotate,
    ratings_for_dimension,
    save_rating,
    skip_step,
)
from wmstudio.store.annotation import DEFAULT_OVERLAP  # noqa: F401 - re-exported


def agreement_data(store: Store) -> AgreementReport:
    """Krippendorff's alpha (ordinal) per dimension over every rating in the store, with the distributions."""
    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for dimension in RATING_DIMENSIONS:
        for value in ratings_for_dimension(store, dimension):
            row = merged.setdefault((value.step_id, value.annotator), {"unit": value.step_id, "annotator": value.annotator})
            row[dimension] = value.value
    return agreement_report(list(merged.values()), dimensions=RATING_DIMENSIONS, level="ordinal")


@dataclass
class _Computed:
    started: float
    report: AgreementReport


_AGREEMENT: dict[Path, _Computed] = {}
_AGREEMENT_LOCK = threading.Lock()


def current_agreement(store: Store, max_age_s: float = 0.0) -> AgreementReport:
    """The agreement report from a computation that started at most `max_age_s` before this call (0: one that
    includes every rating saved before it)."""
    asked = time.monotonic()
    with _AGREEMENT_LOCK:
        cached = _AGREEMENT.get(store.path)
        if cached is None or cached.started < asked - max_age_s:
            cached = _Computed(time.monotonic(), agreement_data(store))
            _AGREEMENT[store.path] = cached
    return cached.report
