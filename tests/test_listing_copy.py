"""Copying a listing whole: a read-only list call on a world no one trained on answers with the records the state
holds for its filters and page, each laid out and written before denoising, with the page's count, its `more` flag
and an empty next-page token where the records found say them."""

from __future__ import annotations

import json

import pytest
from generated_calls import generated_calls

from wmstudio.model.backends import load_backend
from wmstudio.model.generation import generate
from wmstudio.model.listing_copy import listing_copy
from wmstudio.model.sampler import SamplerSettings
from wmstudio.train.field_kinds import field_leaves
from wmstudio.world.jsonpath import format_path


def _listings(count: int):
    """(world, call, simulator's answer, listing copy) of generated worlds' read-only list calls answered ok."""
    for world, call, truth in generated_calls(12, count, 40):
        tool = world.tool(call.name)
        copy = listing_copy(world, call, (), tool.response) if tool is not None else None
        if copy is not None and truth.get("status") == "ok":
            yield world, call, truth, copy


def test_a_listings_written_values_are_the_simulators():
    right = total = calls = 0
    for _, _, truth, copy in _listings(40):
        calls += 1
        answer = {format_path(list(path)): value for path, value in field_leaves(truth)}
        for path, value in copy.values.items():
            total += 1
            right += answer.get(path, object()) == value
    assert calls >= 15 and total >= 200
    assert right / total >= 0.95, (right, total)


@pytest.fixture(scope="module")
def backend():
    return load_backend()


def test_the_shipped_model_lists_the_records_it_was_never_shown_whole(backend):
    checked = 0
    for world, call, truth, _ in _listings(40):
        listed = next((key for key, value in truth.items() if isinstance(value, list) and len(value) >= 2), None)
        if listed is None:
            continue
        response = json.loads(generate(backend, world, call, settings=SamplerSettings()).samples[0].response)
        assert response[listed] == truth[listed], (world.name, call)
        checked += 1
        if checked == 3:
            break
    assert checked == 3
