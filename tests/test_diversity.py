"""Self-BLEU and Distinct-N against values worked out by hand."""

import math

import pytest

from wmstudio.metrics.diversity import distinct_n, self_bleu, sentence_bleu, word_tokens


def test_json_is_split_into_words_and_punctuation():
    assert word_tokens('{"status":"ok"}') == ["{", '"', "status", '"', ":", '"', "ok", '"', "}"]


def test_self_bleu_of_two_near_copies_matches_hand_computation():
    # p1 = 3/4, p2 = 2/3, p3 = 1/2, p4 = 0 -> smoothed 0.1/1; equal lengths -> no brevity penalty
    expected = (0.75 * (2 / 3) * 0.5 * 0.1) ** 0.25
    assert self_bleu(["a b c d", "a b c e"]) == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(0.39764, abs=1e-5)


def test_identical_samples_have_self_bleu_one_and_low_distinct():
    texts = ["the order was shipped"] * 8
    assert self_bleu(texts) == pytest.approx(1.0)
    assert distinct_n(texts, 2) == pytest.approx(3 / 24)  # 3 bigrams, each seen 8 times


def test_brevity_penalty_for_short_hypothesis():
    # bigram BLEU of "a b" against "a b c d": precisions 1 and 1, BP = exp(1 - 4/2)
    assert sentence_bleu(["a", "b"], [["a", "b", "c", "d"]], max_n=2) == pytest.approx(math.exp(-1))


def test_distinct_two_pools_bigrams_over_samples():
    # bigrams: ab bc cd | ab bc ce -> 4 unique of 6
    assert distinct_n(["a b c d", "a b c e"], 2) == pytest.approx(4 / 6)
    assert distinct_n(["a b", "c d"], 2) == pytest.approx(1.0)


def test_degenerate_inputs_do_not_crash():
    assert self_bleu(["only one"]) == 0.0
    assert distinct_n([], 2) == 0.0
    assert distinct_n(["a"], 2) == 0.0
