"""What the test modules share: one torch thread for tiny models, tiny world models built on the spot, and the
`slow` / `e2e` markers.

`bash .ci/run` runs everything; `python -m pytest -m "not slow and not e2e"` is the fast subset for development."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from wmstudio.model.network.architecture import MDLM, new_model
from wmstudio.model.network.tokenizer import train_tokenizer
from wmstudio.store.seeding import demo_worlds

E2E = Path(__file__).parent / "e2e"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Browser tests (tests/e2e) carry the `e2e` marker without each module saying so."""
    for item in items:
        if E2E in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def one_thread() -> Iterator[None]:
    """Tiny models gain nothing from threads; on a shared 2-core machine they only contend."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


TinyModel = Callable[..., str]


@pytest.fixture(scope="session")
def tiny_model() -> TinyModel:
    """`tiny_model(tokenizer, folder, kind="mdlm", layers=1, hidden=32, ...)`: a random world model of that shape
    saved with its tokenizer in `folder` (its answers are nonsense, but canvases keep them well-formed)."""

    def build(tokenizer, folder: Path, kind: str = MDLM, layers: int = 1, hidden: int = 32, heads: int = 2,
              ffn: int = 64, max_positions: int = 4096, seed: int = 0) -> str:
        torch.manual_seed(seed)
        model = new_model(tokenizer, kind=kind, layers=layers, hidden=hidden, heads=heads, ffn=ffn,
                          max_positions=max_positions)
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return str(folder)

    return build


@pytest.fixture(scope="session")
def demo_tokenizer():
    """A tokenizer trained on the five demo worlds (what the studio tests' tiny models read)."""
    return train_tokenizer([world.dumps() for world in demo_worlds()] * 2, vocab_size=2000)
