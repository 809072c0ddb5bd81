"""Inter-annotator agreement: Krippendorff's alpha (nominal, ordinal, interval, ratio) and rating summaries.

Own implementation of Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", so Likert ratings
get the ordinal level (the common package is GPL-3 and defaults to interval); checked against the paper."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import is_number, number_in

LEVELS = ("nominal", "ordinal", "interval", "ratio")
DIMENSIONS = ("realism", "outcome_correctness", "training_utility")
LIKERT = (1, 2, 3, 4, 5)


class AlphaUndefined(ValueError):
    """Alpha cannot be computed from these ratings (fewer than 2 pairable values, or no variation at all).

    Not bad input: the data are valid but uninformative; the message says what more is needed."""


@dataclass(frozen=True)
class Rating:
    """One annotator's 1-5 scores for one unit (a step): `scores` maps a dimension to a value or None (skipped)."""

    unit: Hashable
    annotator: str
    scores: Mapping[str, int | None] = field(default_factory=dict)


@dataclass
class ReliabilityMatrix:
    """Reliability data in canonical form: one row per annotator, one column per unit, None where missing."""

    annotators: list[Hashable]
    units: list[Hashable]
    values: list[list[Any]]


@dataclass
class Coincidences:
    """The coincidence matrix of pairable values: `counts[(c, k)]` = o_ck, `marginals[c]` = n_c, `total` = n.

    Only units with at least two values contribute (a single rating has nothing to be compared with)."""

    values: list[Any]
    counts: dict[tuple[Any, Any], float]
    marginals: dict[Any, float]
    total: float
    pairable_units: int


@dataclass
class DimensionAgreement:
    """Agreement on one rating dimension: alpha (None with `note` saying why), distribution and counts."""

    dimension: str
    alpha: float | None
    note: str
    distribution: dict[int, int]
    ratings: int
    pairable_values: int
    pairable_units: int

    def to_json(self) -> dict[str, Any]:
        return {
            "dimension": self.dimension,
            "alpha": self.alpha,
            "note": self.note,
            "distribution": {str(k): v for k, v in self.distribution.items()},
            "ratings": self.ratings,
            "pairable_values": self.pairable_values,
            "pairable_units": self.pairable_units,
        }


@dataclass
class AgreementReport:
    """What the agreement view shows: per-dimension alpha at one level, distributions, who rated how much."""

    level: str
    dimensions: list[DimensionAgreement]
    annotators: int
    units: int

    def dimension(self, name: str) -> DimensionAgreement:
        """The entry for dimension `name`; KeyError lists the known ones."""
        for entry in self.dimensions:
            if entry.dimension == name:
                return entry
        raise KeyError(f"no dimension {name!r} (known: {', '.join(d.dimension for d in self.dimensions)})")

    def to_json(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "annotators": self.annotators,
            "units": self.units,
            "dimensions": [d.to_json() for d in self.dimensions],
        }


def matrix_from_triples(triples: Iterable[Sequence[Any]], source: str = "ratings") -> ReliabilityMatrix:
    """Build the annotators x units matrix from (unit, annotator, value) triples, in first-seen order.

    An annotator rating the same unit twice is an error (which one counts?): InvalidInput names both entries."""
    annotators: dict[Hashable, int] = {}
    units: dict[Hashable, int] = {}
    cells: dict[tuple[int, int], Any] = {}
    first_seen: dict[tuple[int, int], int] = {}
    problems: list[Problem] = []
    for i, triple in enumerate(triples):
        if not isinstance(triple, Sequence) or isinstance(triple, str) or len(triple) != 3:
            problems.append(Problem(f"{source}[{i}]", "expected a (unit, annotator, value) triple"))
            continue
        unit, annotator, value = triple
        row = annotators.setdefault(annotator, len(annotators))
        col = units.setdefault(unit, len(units))
        if (row, col) in cells:
            problems.append(Problem(
                f"{source}[{i}]",
                f"annotator {annotator!r} rated unit {unit!r} twice (also {source}[{first_seen[row, col]}]): keep one",
            ))
            continue
        cells[row, col] = value
        first_seen[row, col] = i
    if problems:
        raise InvalidInput(problems)
    values = [[cells.get((r, c)) for c in range(len(units))] for r in range(len(annotators))]
    return ReliabilityMatrix(annotators=list(annotators), units=list(units), values=values)


def coincidence_matrix(data: Any, level: str = "ordinal") -> Coincidences:
    """Coincidences o_ck of the pairable values in `data` (a matrix, ReliabilityMatrix or triples).

    Each unit with m >= 2 values adds 1/(m-1) for every ordered pair of its values from different annotators."""
    _check_level(level)
    units = _unit_values(data, level)
    counts: dict[tuple[Any, Any], float] = defaultdict(float)
    pairable_units = 0
    for values in units:
        m = len(values)
        if m < 2:
            continue
        pairable_units += 1
        tally = Counter(values)
        for c, n_c in tally.items():
            for k, n_k in tally.items():
                pairs = n_c * (n_c - 1) if c == k else n_c * n_k
                if pairs:
                    counts[c, k] += pairs / (m - 1)
    marginals: dict[Any, float] = defaultdict(float)
    for (c, _k), o_ck in counts.items():
        marginals[c] += o_ck
    ordered = sorted(marginals, key=_sort_key)
    return Coincidences(
        values=ordered,
        counts=dict(counts),
        marginals={c: marginals[c] for c in ordered},
        total=sum(marginals.values()),
        pairable_units=pairable_units,
    )


def krippendorff_alpha(data: Any, level: str = "ordinal") -> float:
    """Krippendorff's alpha = 1 - D_o / D_e for reliability data at `level` (nominal|ordinal|interval|ratio).

    `data`: a matrix (annotators x units, lists or tuples of other lengths than 3; None/NaN = missing), a
    ReliabilityMatrix, or a list of (unit, annotator, value) tuples. Units with a single value are ignored.
    Raises AlphaUndefined when fewer than 2 values are pairable or all pairable values are equal (no variation:
    alpha is 0/0 there); InvalidInput for malformed data (ragged rows, non-numbers at interval/ratio)."""
    table = coincidence_matrix(data, level)
    if table.total < 2:
        raise AlphaUndefined(
            f"alpha needs at least 2 pairable values (units rated by 2+ annotators); got {table.total:g}: "
            "have a second annotator rate some of the same units"
        )
    if len(table.values) < 2:
        raise AlphaUndefined(
            f"all {table.total:g} pairable values are {table.values[0]!r}: with no variation alpha is undefined "
            "(observed and expected disagreement are both 0)"
        )
    delta = _difference_function(table, level)
    n = table.total
    observed = sum(o_ck * delta(c, k) for (c, k), o_ck in table.counts.items()) / n
    expected = sum(
        table.marginals[c] * table.marginals[k] * delta(c, k) for c in table.values for k in table.values
    ) / (n * (n - 1))
    return 1.0 - observed / expected


def rating_distribution(values: Iterable[Any], scale: Sequence[int] = LIKERT, source: str = "ratings") -> dict[int, int]:
    """How often each point of the scale (default 1-5 Likert) was given; every point is a key, None is skipped.

    A value off the scale or not a whole number is InvalidInput naming its position and the allowed values."""
    counts = {point: 0 for point in scale}
    problems = []
    for i, value in enumerate(values):
        if _is_missing(value):
            continue
        problem = _scale_problem(value, scale)
        if problem:
            problems.append(Problem(f"{source}[{i}]", problem))
            continue
        counts[int(value)] += 1
    if problems:
        raise InvalidInput(problems)
    return counts


def agreement_report(
    ratings: Iterable[Rating | Mapping[str, Any]],
    dimensions: Sequence[str] = DIMENSIONS,
    level: str = "ordinal",
    scale: Sequence[int] = LIKERT,
) -> AgreementReport:
    """Per-dimension alpha, rating distribution and pairable counts for the agreement view.

    `ratings`: Rating objects or mappings `{"unit", "annotator", "<dimension>": value, ...}` (the dimension
    values may also sit under "scores"). Where alpha is undefined it is None and `note` says why."""
    _check_level(level)
    parsed = [_as_rating(item, i, dimensions, scale) for i, item in enumerate(ratings)]
    seen: dict[tuple[Hashable, str], int] = {}
    for i, rating in enumerate(parsed):
        if (rating.unit, rating.annotator) in seen:
            raise InvalidInput(Problem(f"ratings[{i}]", f"annotator {rating.annotator!r} rated unit {rating.unit!r} "
                                       f"twice (also ratings[{seen[rating.unit, rating.annotator]}]): keep one"))
        seen[rating.unit, rating.annotator] = i
    report_dims = []
    for dim in dimensions:
        triples = [(r.unit, r.annotator, r.scores.get(dim)) for r in parsed if r.scores.get(dim) is not None]
        distribution = rating_distribution((value for _u, _a, value in triples), scale, source=dim)
        matrix = matrix_from_triples(triples, source=dim)
        table = coincidence_matrix(matrix, level)
        try:
            alpha, note = krippendorff_alpha(matrix, level), ""
        except AlphaUndefined as err:
            alpha, note = None, str(err)
        report_dims.append(DimensionAgreement(
            dimension=dim,
            alpha=alpha,
            note=note,
            distribution=distribution,
            ratings=len(triples),
            pairable_values=round(table.total),
            pairable_units=table.pairable_units,
        ))
    return AgreementReport(
        level=level,
        dimensions=report_dims,
        annotators=len({r.annotator for r in parsed}),
        units=len({r.unit for r in parsed}),
    )


def _difference_function(table: Coincidences, level: str):
    """The squared difference delta^2(c, k) of Krippendorff (2011) for `level`."""
    if level == "nominal":
        return lambda c, k: 0.0 if c == k else 1.0
    if level == "interval":
        return lambda c, k: float(c - k) ** 2
    if level == "ratio":
        return lambda c, k: 0.0 if c == k else ((c - k) / (c + k)) ** 2
    # ordinal: (sum of marginals from c to k, minus half of n_c and n_k)^2, ranks from the values used
    rank = {value: i for i, value in enumerate(table.values)}
    cumulative = [0.0]
    for value in table.values:
        cumulative.append(cumulative[-1] + table.marginals[value])

    def ordinal(c: Any, k: Any) -> float:
        lo, hi = sorted((rank[c], rank[k]))
        between = cumulative[hi + 1] - cumulative[lo]
        return (between - (table.marginals[c] + table.marginals[k]) / 2) ** 2

    return ordinal


def _unit_values(data: Any, level: str) -> list[list[Any]]:
    """The non-missing values of each unit, validated for `level`."""
    if isinstance(data, ReliabilityMatrix):
        rows = data.values
    else:
        items = _as_list(data)
        if items and all(isinstance(item, tuple) and len(item) == 3 for item in items):
            rows = matrix_from_triples(items).values
        else:
            rows = [_as_list(row, f"data[{i}]") for i, row in enumerate(items)]
    if rows and len({len(row) for row in rows}) > 1:
        lengths = ", ".join(str(len(row)) for row in rows)
        raise InvalidInput(Problem("data", f"rows have different lengths ({lengths}): give every annotator a value "
                                           "or None for every unit"))
    problems = []
    units = []
    for col in range(len(rows[0]) if rows else 0):
        values = []
        for row_index, row in enumerate(rows):
            value = row[col]
            if _is_missing(value):
                continue
            problem = _value_problem(value, level)
            if problem:
                problems.append(Problem(f"data[{row_index}][{col}]", problem))
                continue
            values.append(value)
        units.append(values)
    if problems:
        raise InvalidInput(problems)
    return units


def _value_problem(value: Any, level: str) -> str | None:
    if level == "nominal":
        return None if isinstance(value, Hashable) else f"{value!r} cannot be a category (use text or a number)"
    if not is_number(value):
        return f"{value!r} is not a number: the {level} level needs numeric values (or use level='nominal')"
    if level == "ratio" and value < 0:
        return f"{value!r} is negative: the ratio level needs values >= 0 (or use level='interval')"
    return None


def _as_list(data: Any, source: str = "data") -> list[Any]:
    if hasattr(data, "tolist"):  # numpy arrays and pandas frames
        data = data.tolist()
    if isinstance(data, (str, bytes)) or not isinstance(data, Iterable):
        raise InvalidInput(Problem(source, "expected a matrix (list of rows) or a list of (unit, annotator, value)"))
    return list(data)


def _as_rating(item: Any, index: int, dimensions: Sequence[str], scale: Sequence[int]) -> Rating:
    path = f"ratings[{index}]"
    if isinstance(item, Rating):
        item = {"unit": item.unit, "annotator": item.annotator, "scores": item.scores}
    if not isinstance(item, Mapping):
        raise InvalidInput(Problem(path, "expected a Rating or {'unit': ..., 'annotator': ..., <dimension>: 1-5}"))
    missing = [key for key in ("unit", "annotator") if item.get(key) is None]
    if missing:
        raise InvalidInput(Problem(path, f"missing {' and '.join(missing)}: say who rated which step"))
    scores = item.get("scores", item)
    if not isinstance(scores, Mapping):
        raise InvalidInput(Problem(f"{path}.scores", "must map each dimension to a 1-5 value"))
    rating = Rating(unit=item["unit"], annotator=item["annotator"], scores={d: scores.get(d) for d in dimensions})
    problems = [
        Problem(f"{path}.{dim}", problem)
        for dim in dimensions
        if not _is_missing(rating.scores[dim]) and (problem := _scale_problem(rating.scores[dim], scale))
    ]
    if problems:
        raise InvalidInput(problems)
    return rating


def _scale_problem(value: Any, scale: Sequence[int]) -> str | None:
    """Why `value` is not a point of the rating scale, or None when it is."""
    on_scale = (
        number_in(value) and value == int(value) and int(value) in scale
    )
    return None if on_scale else f"{value!r} is not on the scale: give one of {list(scale)}"


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise InvalidInput(Problem("level", f"{level!r} is not known: use one of {', '.join(LEVELS)}"))


def _sort_key(value: Any) -> tuple[int, Any]:
    """Numbers in numeric order, then everything else by its text (nominal categories may mix types)."""
    if is_number(value):
        return (0, value)
    return (1, str(value))
