"""Repeated words, the stutter a small model writes into a message ("refunds close close after 30 days days")."""

from __future__ import annotations

from wmstudio.world.checks.text_quality import repeated_words, response_repeats


def test_a_word_repeated_with_only_spaces_between_counts_once_per_repeat():
    assert repeated_words("ORD-12002 was delivered 19 days ago; refunds close close after30 days days") == \
        ["close", "days"]
    assert repeated_words("Days  days DAYS gone") == ["days", "days"]
    assert repeated_words("very, very late. Late again; again") == []  # punctuation parts them
    assert repeated_words("") == [] and repeated_words("the order is the order") == []


def test_a_response_counts_the_repeats_of_all_its_texts():
    response = {"message": "no no refund", "items": [{"name": "Desk Lamp Lamp"}], "reason": "late", "total": 3}
    assert response_repeats(response) == 2
    assert response_repeats("not json json") == 1 and response_repeats(None) == 0
