"""How a denoising step scores each masked slot's confidence (the sampler's `strategy`): one table, whose names are
the settings' choices (model/denoising/sampler_settings.py) and whose functions the sampler calls (model/denoising/sampler.py). torch is
imported by the functions, not here: the settings (and so `wmstudio --help`) read the names without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Scorer = Callable[["torch.Tensor", "torch.Tensor", "torch.Generator"], "torch.Tensor"]


def _probability(logits: torch.Tensor, guess: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """p(guess): the probability of the token the step would commit."""
    import torch

    return torch.softmax(logits, dim=-1).gather(-1, guess.unsqueeze(-1)).squeeze(-1)


def _margin(logits: torch.Tensor, guess: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Top-1 minus top-2 probability."""
    import torch

    top = torch.softmax(logits, dim=-1).topk(2, dim=-1).values
    return top[..., 0] - top[..., 1]


def _certainty(logits: torch.Tensor, guess: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """exp(-entropy) of the slot's distribution."""
    import torch

    return torch.exp(-torch.special.entr(torch.softmax(logits, dim=-1)).sum(dim=-1))


def _random(logits: torch.Tensor, guess: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """A uniform draw: slots unmasked in random order."""
    import torch

    return torch.rand(guess.shape, generator=generator, device=guess.device)


SCORERS: dict[str, Scorer] = {"low_confidence": _probability, "margin": _margin, "entropy": _certainty,
                              "random": _random}
STRATEGIES = tuple(SCORERS)
