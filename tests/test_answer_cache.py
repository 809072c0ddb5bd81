"""The world model's answer cache: a greedy answer an episode repeats is generated once and is the same answer; a
sampled one is never cached; a different history or world is a different answer; GRPO's groups share it."""

from __future__ import annotations

import dataclasses

import pytest

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.answer_cache import AnswerCache, CachedAnswer
from wmstudio.model.serving.backends import load_backend
from wmstudio.train.agent.agent_config import DEFAULT_POLICY
from wmstudio.train.agent.agent_policy import load_policy
from wmstudio.train.agent.environments import WORLD_MODEL, EpisodeWorld
from wmstudio.train.agent.scenarios import TRAIN, demo_scenarios, split_of
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call


@pytest.fixture(scope="module")
def backend():
    return load_backend()


@pytest.fixture(scope="module")
def scenario():
    return next(s for s in split_of(demo_scenarios(), TRAIN) if s.world.name == "retail")


def test_a_repeated_greedy_call_is_answered_once_with_the_same_answer(backend, scenario):
    order = scenario.world.initial_state["orders"][0]["id"]
    call = Call("get_order", {"order_id": order})
    cache = AnswerCache()
    first = EpisodeWorld(scenario, WORLD_MODEL, backend, cache=cache)
    second = EpisodeWorld(scenario, WORLD_MODEL, backend, cache=cache)
    uncached = EpisodeWorld(scenario, WORLD_MODEL, backend)
    answer = first.answer(call)
    assert (cache.hits, cache.misses) == (0, 1)
    assert second.answer(call) == answer == uncached.answer(call)
    assert (cache.hits, cache.misses) == (1, 1) and second.prompts == first.prompts
    assert second.history[-1].response == answer  # the episode goes on from the cached answer
    again = second.answer(call)  # the same call after a turn: another history, another answer computed
    assert (cache.hits, cache.misses) == (1, 2) and again
    assert "1 of 3 greedy world-model answers from the cache" in cache.summary()


def test_what_decides_an_answer_is_in_its_key(scenario):
    cache = AnswerCache()
    call, greedy = Call("get_order", {"order_id": "ORD-23411"}), SamplerSettings()
    key = cache.key("m", scenario.world, call, [], [], greedy)
    assert key == cache.key("m", scenario.world, call, [], [], SamplerSettings())
    assert cache.key("m", scenario.world, call, [], [], SamplerSettings(temperature=1.0)) is None  # sampled
    other_world = dataclasses.replace(scenario.world, directives=[*scenario.world.directives, "Answer tersely."])
    history = [HistoryStep(Call("list_orders", {}), '{"orders": []}')]
    different = {cache.key("other", scenario.world, call, [], [], greedy),
                 cache.key("m", other_world, call, [], [], greedy),
                 cache.key("m", scenario.world, Call("get_order", {"order_id": "ORD-1"}), [], [], greedy),
                 cache.key("m", scenario.world, call, [], history, greedy),
                 cache.key("m", scenario.world, call, [], [], SamplerSettings(copy_head=False))}
    assert key not in different and len(different) == 5


def test_the_oldest_answer_leaves_a_full_cache():
    cache = AnswerCache(size=2)
    for key in "abc":
        cache.put(key, CachedAnswer(key, ""))
    assert cache.get("a") is None and cache.get("b").response == "b" and cache.get("c").response == "c"


def test_a_grpo_group_in_the_world_model_answers_its_repeated_opening_from_the_cache(backend, scenario):
    from wmstudio.train.agent.grpo import play_group

    policy = load_policy(DEFAULT_POLICY)
    cache = AnswerCache()
    rollouts = play_group(policy, [scenario] * 4, WORLD_MODEL, backend, sample=False, cache=cache)
    calls = sum(len(r.trajectory.steps) for r in rollouts)
    assert calls >= 4 and cache.hits + cache.misses == calls
    assert cache.misses == len(rollouts[0].trajectory.steps)  # greedy: four copies of one episode, played once
    assert len({tuple(s.response for s in r.trajectory.steps) for r in rollouts}) == 1
