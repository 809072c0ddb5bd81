"""Krippendorff's alpha against the published worked example, its edge cases, and the agreement report.

Reference: Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section E (4 observers x 12 units)."""

import json
import math

import pytest

from wmstudio.metrics.agreement import (
    AlphaUndefined,
    Rating,
    ReliabilityMatrix,
    agreement_report,
    coincidence_matrix,
    krippendorff_alpha,
    matrix_from_triples,
    rating_distribution,
)
from wmstudio.problems import InvalidInput

N = None
# The paper's reliability data matrix: observers A-D (rows) x units 1-12 (columns), None = missing.
PAPER_MATRIX = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, N, N, N],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, N, 3],
    [N, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, N],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, N],
]
PUBLISHED_ALPHA = {"nominal": 0.743, "ordinal": 0.815, "interval": 0.849, "ratio": 0.797}


def paper_triples():
    return [
        (f"unit{u + 1}", "ABCD"[a], value)
        for a, row in enumerate(PAPER_MATRIX)
        for u, value in enumerate(row)
        if value is not None
    ]


@pytest.mark.parametrize("level", sorted(PUBLISHED_ALPHA))
def test_published_example_matches_to_three_decimals(level):
    assert round(krippendorff_alpha(PAPER_MATRIX, level), 3) == PUBLISHED_ALPHA[level]


def test_default_level_is_ordinal():
    assert krippendorff_alpha(PAPER_MATRIX) == krippendorff_alpha(PAPER_MATRIX, "ordinal")


def test_coincidence_marginals_match_the_paper():
    table = coincidence_matrix(PAPER_MATRIX)
    assert {value: round(n, 9) for value, n in table.marginals.items()} == {1: 9, 2: 13, 3: 10, 4: 5, 5: 3}
    assert round(table.total, 9) == 40
    assert table.pairable_units == 11  # unit 12 has a single value
    assert round(table.counts[1, 1], 9) == 7 and round(table.counts[2, 3], 9) == round(4 / 3, 9)


@pytest.mark.parametrize("level", sorted(PUBLISHED_ALPHA))
def test_triples_and_matrix_give_the_same_alpha(level):
    from_triples = krippendorff_alpha(paper_triples(), level)
    assert from_triples == pytest.approx(krippendorff_alpha(PAPER_MATRIX, level), abs=1e-12)
    matrix = matrix_from_triples(paper_triples())
    assert matrix.annotators == ["A", "B", "C", "D"]
    # first-seen order: observer B rated unit 12 before observer C rated unit 11
    assert matrix.units == [f"unit{u}" for u in (*range(1, 11), 12, 11)]
    assert krippendorff_alpha(matrix, level) == pytest.approx(from_triples, abs=1e-12)


def test_numpy_matrix_with_nan_for_missing():
    import numpy as np

    array = np.array([[math.nan if v is None else v for v in row] for row in PAPER_MATRIX], dtype=float)
    assert round(krippendorff_alpha(array, "interval"), 3) == 0.849


@pytest.mark.parametrize("level", sorted(PUBLISHED_ALPHA))
def test_perfect_agreement_is_one(level):
    matrix = [[1, 2, 3, 4, 5, N], [1, 2, 3, 4, 5, 2], [1, N, 3, 4, 5, 2]]
    assert krippendorff_alpha(matrix, level) == 1.0


def test_units_with_a_single_rating_are_ignored():
    with_singles = [row + [value, N] for row, value in zip(PAPER_MATRIX, (5, N, N, N))]
    with_singles[1][-1] = 1
    assert krippendorff_alpha(with_singles) == pytest.approx(krippendorff_alpha(PAPER_MATRIX), abs=1e-12)


def test_ordinal_punishes_far_disagreement_more_than_near():
    near = [[1, 2, 3, 4, 5, 3], [1, 2, 3, 4, 5, 4]]
    far = [[1, 2, 3, 4, 5, 1], [1, 2, 3, 4, 5, 5]]
    assert krippendorff_alpha(near) > krippendorff_alpha(far)
    # nominal sees both as one disagreement of a kind
    assert krippendorff_alpha(near, "nominal") == pytest.approx(krippendorff_alpha(far, "nominal"), abs=0.05)


def test_systematic_disagreement_is_below_zero():
    assert krippendorff_alpha([[1, 5, 1, 5], [5, 1, 5, 1]], "ordinal") < 0


def test_fewer_than_two_pairable_values_is_undefined_with_a_clear_message():
    with pytest.raises(AlphaUndefined, match="at least 2 pairable values"):
        krippendorff_alpha([[1, N, 3], [N, 2, N]])
    with pytest.raises(AlphaUndefined, match="at least 2 pairable values"):
        krippendorff_alpha([])


def test_no_variation_is_undefined_not_one():
    with pytest.raises(AlphaUndefined, match="no variation"):
        krippendorff_alpha([[4, 4, 4], [4, 4, N]])


def test_ragged_rows_are_rejected():
    with pytest.raises(InvalidInput, match="rows have different lengths"):
        krippendorff_alpha([[1, 2, 3], [1, 2]])


def test_text_values_need_the_nominal_level():
    with pytest.raises(InvalidInput, match=r"data\[1\]\[0\].*not a number.*nominal"):
        krippendorff_alpha([[1, 2], ["high", 2]], "interval")
    assert krippendorff_alpha([["a", "b", "a"], ["a", "b", "b"]], "nominal") < 1


def test_negative_values_are_rejected_at_ratio_level():
    with pytest.raises(InvalidInput, match="negative"):
        krippendorff_alpha([[-1, 2], [1, 2]], "ratio")


def test_unknown_level_is_rejected():
    with pytest.raises(InvalidInput, match="level: 'likert' is not known"):
        krippendorff_alpha(PAPER_MATRIX, "likert")


def test_a_unit_rated_twice_by_one_annotator_is_rejected():
    triples = [("s1", "ann", 3), ("s1", "bob", 3), ("s1", "ann", 4)]
    with pytest.raises(InvalidInput, match=r"ratings\[2\]: annotator 'ann' rated unit 's1' twice"):
        matrix_from_triples(triples)


def test_rating_distribution_counts_every_scale_point():
    assert rating_distribution([5, 4, 4, None, 1, 4.0]) == {1: 1, 2: 0, 3: 0, 4: 3, 5: 1}
    assert rating_distribution([]) == {1: 0, 2: 0, 3: 0, 4: 0, 5: 0}


@pytest.mark.parametrize("bad", [0, 6, 2.5, "3", True])
def test_rating_distribution_rejects_values_off_the_scale(bad):
    with pytest.raises(InvalidInput, match=r"ratings\[1\]: .* is not on the scale"):
        rating_distribution([3, bad])


def paper_ratings():
    """The paper's matrix as realism; outcome correctness everyone agrees on; utility from one annotator only."""
    ratings = []
    for unit, annotator, value in paper_triples():
        ratings.append({
            "unit": unit,
            "annotator": annotator,
            "realism": value,
            "outcome_correctness": 1 + int(unit[4:]) % 5,
            "training_utility": 3 if annotator == "A" else None,
        })
    return ratings


def test_agreement_report_per_dimension():
    report = agreement_report(paper_ratings())
    assert report.level == "ordinal" and report.annotators == 4 and report.units == 12
    realism = report.dimension("realism")
    assert round(realism.alpha, 3) == 0.815
    assert realism.distribution == {1: 9, 2: 13, 3: 11, 4: 5, 5: 3}  # unit 12's lone 3 counts here
    assert (realism.ratings, realism.pairable_values, realism.pairable_units) == (41, 40, 11)
    assert report.dimension("outcome_correctness").alpha == 1.0
    utility = report.dimension("training_utility")
    assert utility.alpha is None and "at least 2 pairable values" in utility.note
    assert utility.ratings == 9 and utility.pairable_values == 0
    assert json.loads(json.dumps(report.to_json()))["dimensions"][0]["distribution"]["3"] == 11


def test_agreement_report_takes_rating_objects_and_other_levels():
    ratings = [Rating(unit=u, annotator=a, scores={"realism": v}) for u, a, v in paper_triples()]
    report = agreement_report(ratings, dimensions=["realism"], level="interval")
    assert round(report.dimension("realism").alpha, 3) == 0.849
    with pytest.raises(KeyError, match="realism"):
        report.dimension("fluency")


def test_agreement_report_names_the_bad_rating_field():
    ratings = paper_ratings()
    ratings[2]["realism"] = 7
    with pytest.raises(InvalidInput, match=r"ratings\[2\]\.realism: 7 is not on the scale"):
        agreement_report(ratings)
    with pytest.raises(InvalidInput, match=r"ratings\[0\]: missing annotator"):
        agreement_report([{"unit": "s1", "realism": 3}])
    duplicate = paper_ratings()[:2] + [paper_ratings()[0]]
    with pytest.raises(InvalidInput, match=r"ratings\[2\]: annotator 'A' rated unit 'unit1' twice"):
        agreement_report(duplicate)


def test_reliability_matrix_dataclass_is_accepted():
    matrix = ReliabilityMatrix(annotators=["A", "B"], units=["u1", "u2", "u3"], values=[[1, 2, 3], [1, 2, 4]])
    assert 0 < krippendorff_alpha(matrix) < 1
