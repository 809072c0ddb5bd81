"""Request batching (model/serving/batching.py): requests that denoise at the same time share one forward per step, and
each gets exactly what it would have got alone."""

from __future__ import annotations

import threading

import pytest
import torch

from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.model.generation.generation import generate
from wmstudio.model.serving.backends import load_backend
from wmstudio.model.serving.batching import ForwardBatcher, _Job, shared_forward
from wmstudio.store.seeding import demo_worlds
from wmstudio.world.spec import Call


@pytest.fixture(scope="module")
def backend(one_thread):
    return load_backend()


def test_a_shared_forward_gives_each_request_its_own_logits_and_hidden_states(backend):
    generator = torch.Generator().manual_seed(0)
    jobs = []
    for prompt_len, canvas_len, samples in [(50, 20, 2), (130, 33, 1), (9, 41, 3)]:
        prompt = torch.randint(5, backend.vocab_size, (prompt_len,), generator=generator).tolist()
        canvas = torch.randint(0, backend.vocab_size, (samples, canvas_len), generator=generator)
        jobs.append(_Job(canvas, backend.encode_prompt(prompt)))
    for job, (logits, hidden) in zip(jobs, shared_forward(backend, jobs)):
        alone_logits, alone_hidden = backend.canvas_outputs(job.canvas_ids, job.cache)
        assert logits.shape == alone_logits.shape
        assert torch.allclose(logits, alone_logits, atol=1e-4)
        assert torch.allclose(hidden, alone_hidden, atol=1e-4)  # the copy head reads these


def test_concurrent_generations_are_batched_and_answer_as_they_would_alone(backend):
    worlds = {world.name: world for world in demo_worlds()}
    requests = [(worlds["retail"], Call("get_order", {"order_id": "ORD-23411"})),
                (worlds["retail"], Call("refund_order", {"order_id": "ORD-23130", "amount_cents": 500})),
                (worlds["airline"], Call("search_flights", {"origin": "DEN", "destination": "PHX",
                                                            "date": "2025-08-09"})),
                (worlds["filesystem"], Call("ls", {"path": "/home"}))]
    settings = SamplerSettings(temperature=0.7, seed=3, samples=2)
    alone = [[s.response for s in generate(backend, world, call, settings=settings).samples]
             for world, call in requests]
    # A long window: a forward waits until every open request has sent its canvases or finished, however long
    # each request takes before its first denoising step (a busy CI machine spreads them by hundreds of ms).
    batcher = ForwardBatcher(backend, window_ms=30_000)
    together: list = [None] * len(requests)
    start = threading.Barrier(len(requests))

    def run(i: int) -> None:
        world, call = requests[i]
        with batcher.session() as shared:
            start.wait()
            together[i] = [s.response for s in generate(shared, world, call, settings=settings).samples]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(requests))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert together == alone
    assert batcher.stats.largest > settings.samples  # canvases of several requests went through one forward
    assert batcher.stats.forwards < batcher.stats.rows  # fewer forwards than canvases


def test_a_failing_forward_reaches_every_waiting_request_instead_of_hanging(backend):
    batcher = ForwardBatcher(backend)
    bad = backend.encode_prompt([5, 6, 7])
    with batcher.session() as shared:
        with pytest.raises(Exception):
            shared.canvas_outputs(torch.tensor([[backend.vocab_size + 10]]), bad)  # an id past the vocabulary
        logits, _ = shared.canvas_outputs(torch.tensor([[5, 6]]), bad)  # the worker lives on
    assert logits.shape[:2] == (1, 2)
