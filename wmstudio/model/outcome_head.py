"""The outcome head: a response's status and error code, chosen from the call and the state before denoising.

Whether a call succeeds turns on lookups, a record's flags, a date's age and comparisons of numbers
(world/outcome_features.py names them). The 1.6M-parameter denoiser learns the response's form and copies its
values, but decides ok / error from those facts only a little better than a lookup table; a linear scorer over the
named facts, crossed with the tool and hashed (the hashing trick), learns them from the training corpus in two
minutes. Its choice is written into the canvas's own status and error slots before denoising (the layout the model was
trained on, not an anchor's text in place of the slots), so the denoiser writes the rest under it (an error's
message, a refund's empty fields). Weights live beside the checkpoint in `outcome_head.safetensors` (float16),
the tools it knows and their outcomes in `outcome_head.json`; a tool it never saw is left to the canvas."""

from __future__ import annotations

import json
import math
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from jsonschema import validators

from wmstudio.model.canvas import OUTCOME_KEY, OUTCOME_VALUES
from wmstudio.world.anchors import Anchor
from wmstudio.world.grounding import NONE
from wmstudio.world.history import HistoryStep
from wmstudio.world.outcome_features import DIRECTIVE, outcome_features
from wmstudio.world.spec import Call, WorldSpec

HEAD_FILE, CONFIG_FILE = "outcome_head.safetensors", "outcome_head.json"
ERROR_KEY = "error"  # the top-level field that names what went wrong (`ORDER_NOT_FOUND`), "" when nothing did
BUCKETS = 1 << 18  # hashed (fact, tool, outcome) weights: 512 KB in float16
EPOCHS, LEARNING_RATE, L2 = 300, 0.05, 1e-5  # full-batch Adam; measured on 16k rows: 97% status, 96% code held out


@dataclass(frozen=True)
class Outcome:
    """The head's choice for one call: its status, its error code ("" for none) and how likely it found it."""

    status: str
    error: str
    probability: float

    def values(self, schema: dict[str, Any] | None) -> dict[str, str]:
        """The choice as top-level values of a response `schema`: the status where the schema offers it, the error
        code where the schema has a top-level string `error` that admits it; none on a schema without a status."""
        properties = (schema or {}).get("properties") or {}
        if not _admits(properties.get(OUTCOME_KEY), self.status):
            return {}
        chosen = {OUTCOME_KEY: self.status}
        if _admits(properties.get(ERROR_KEY), self.error):
            chosen[ERROR_KEY] = self.error
        return chosen

    def anchors(self, schema: dict[str, Any] | None) -> list[Anchor]:
        """`values` as anchors (what repair holds while it remasks other fields)."""
        return [Anchor(path, value) for path, value in self.values(schema).items()]

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "error": self.error, "probability": round(self.probability, 4)}

    def __str__(self) -> str:
        code = f" {self.error}" if self.error else ""
        return f"{self.status}{code} (p {self.probability:.2f})"


def outcome_of(response: Any) -> tuple[str, str] | None:
    """(status, error code) of a response value whose top-level status is ok or error, else None."""
    if not isinstance(response, dict) or response.get(OUTCOME_KEY) not in OUTCOME_VALUES:
        return None
    code = response.get(ERROR_KEY, "")
    return response[OUTCOME_KEY], code if isinstance(code, str) else ""


class OutcomeHead:
    """A hashed linear scorer: the score of outcome c for a call is the sum of the weights of (fact, tool, c) over
    the call's facts; the outcomes offered are those the tool answered with in training."""

    def __init__(self, weights: torch.Tensor, outcomes: dict[str, list[tuple[str, str]]],
                 keys: dict[str, list[str]] | None = None) -> None:
        self.weights = weights.float()
        self.outcomes = outcomes
        self.keys = keys or {}  # each tool's top-level response keys as fitted: another world's same-named tool differs

    def predict(self, world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                schema: dict[str, Any] | None = None, grounding: str = NONE) -> Outcome | None:
        """The likeliest outcome of `call`, or None for a tool the head was not fitted on (by name, and when a
        response `schema` is given, by its top-level keys: a same-named tool of another world is not this one)."""
        ranked = self.distribution(world, call, history, schema, grounding)
        return ranked[0] if ranked else None

    def distribution(self, world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                     schema: dict[str, Any] | None = None, grounding: str = NONE) -> list[Outcome]:
        """Every outcome the tool answered with in training, with its probability for `call`, likeliest first;
        empty where `predict` abstains. Its facts read the state the prompt shows under `grounding`."""
        choices = self.outcomes.get(call.name)
        if not choices:
            return []
        known = self.keys.get(call.name)
        if schema is not None and known is not None and sorted((schema.get("properties") or {})) != known:
            return []
        facts = outcome_features(world, call, history, grounding)
        scores = torch.stack([self.weights[torch.tensor(fact_buckets(facts, call.name, c))].sum() for c in choices])
        probabilities = torch.softmax(scores, dim=0).tolist()
        ranked = sorted(zip(choices, probabilities), key=lambda pair: -pair[1])
        return [Outcome(status, error, probability) for (status, error), probability in ranked]

    @classmethod
    def fit(cls, rows: Sequence[tuple[WorldSpec, Call, Sequence[HistoryStep], Any, str]], epochs: int = EPOCHS,
            learning_rate: float = LEARNING_RATE, seed: int = 0) -> tuple["OutcomeHead", dict[str, Any]]:
        """Fit on (world, call, history, true response value, grounding) rows; rows without an ok / error status
        are skipped.
        Returns the head and what the fit saw (rows, tools, outcomes, training accuracy, seconds)."""
        torch.manual_seed(seed)
        labelled = [(world, call, history, outcome, grounding) for world, call, history, response, grounding in rows
                    if (outcome := outcome_of(response)) is not None]
        seen: dict[str, Counter] = {}
        keys: dict[str, list[str]] = {}
        for world, call, _, outcome, _ in labelled:
            seen.setdefault(call.name, Counter())[outcome] += 1
            if call.name not in keys:
                keys[call.name] = sorted((_response_schema(world, call) or {}).get("properties") or {})
        outcomes = {tool: sorted(counts) for tool, counts in seen.items()}
        if not labelled:
            return cls(torch.zeros(BUCKETS), outcomes), {"rows": 0, "tools": 0, "train_accuracy": None}
        width = max(len(choices) for choices in outcomes.values())
        buckets, offsets, allowed, targets = [], [], [], []
        for world, call, history, outcome, grounding in labelled:
            facts = outcome_features(world, call, history, grounding)
            choices = outcomes[call.name]
            for k in range(width):
                offsets.append(len(buckets))
                if k < len(choices):
                    buckets += fact_buckets(facts, call.name, choices[k])
            allowed.append([k < len(choices) for k in range(width)])
            targets.append(choices.index(outcome))
        scorer = torch.nn.EmbeddingBag(BUCKETS, 1, mode="sum")
        torch.nn.init.zeros_(scorer.weight)
        optimizer = torch.optim.Adam(scorer.parameters(), lr=learning_rate)
        index, start = torch.tensor(buckets), torch.tensor(offsets)
        mask, target = torch.tensor(allowed), torch.tensor(targets)
        for _ in range(epochs):
            optimizer.zero_grad()
            scores = scorer(index, start).view(-1, width).masked_fill(~mask, -math.inf)
            loss = torch.nn.functional.cross_entropy(scores, target) + L2 * scorer.weight.pow(2).sum()
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            scores = scorer(index, start).view(-1, width).masked_fill(~mask, -math.inf)
            accuracy = float((scores.argmax(1) == target).float().mean())
        head = cls(scorer.weight.detach().squeeze(1).half(), outcomes, keys)
        return head, {"rows": len(labelled), "tools": len(outcomes), "outcomes": sum(map(len, outcomes.values())),
                      "train_accuracy": round(accuracy, 4), "loss": round(loss.item(), 4)}

    def save(self, folder: Path, fitted: dict[str, Any] | None = None) -> None:
        """Write the weights (float16) and the tools' outcomes beside a checkpoint in `folder`."""
        from safetensors.torch import save_file

        folder = Path(folder)
        save_file({"weights": self.weights.half().contiguous()}, str(folder / HEAD_FILE))
        config = {"buckets": BUCKETS, "outcomes": {tool: [list(c) for c in choices]
                                                   for tool, choices in sorted(self.outcomes.items())},
                  "keys": dict(sorted(self.keys.items())), "fitted": fitted or {}}
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")


def fact_buckets(facts: Sequence[str], tool: str, outcome: tuple[str, str]) -> list[int]:
    """The hashed weight ids of `facts` for `tool` and `outcome`: each fact crossed with the tool (a flag means
    something else to another tool), directive words also alone (a directive steers every tool alike)."""
    label = f"{outcome[0]}:{outcome[1]}"
    keys = [f"{tool}|{fact}|{label}" for fact in facts]
    keys += [f"{fact}|{label}" for fact in facts if fact.startswith(DIRECTIVE)]
    return [zlib.crc32(key.encode()) % BUCKETS for key in keys]


def load_outcome_head(folder: Path) -> OutcomeHead | None:
    """The head saved beside a checkpoint, or None when the folder has none (or one of another size)."""
    folder = Path(folder)
    if not (folder / HEAD_FILE).exists() or not (folder / CONFIG_FILE).exists():
        return None
    from safetensors.torch import load_file

    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    if config.get("buckets") != BUCKETS:
        return None
    outcomes = {tool: [(str(s), str(e)) for s, e in choices] for tool, choices in config["outcomes"].items()}
    return OutcomeHead(load_file(str(folder / HEAD_FILE))["weights"], outcomes, config.get("keys"))


def _response_schema(world: WorldSpec, call: Call) -> dict[str, Any] | None:
    try:
        return world.tool(call.name).response
    except KeyError:
        return None


def _admits(schema: Any, value: str) -> bool:
    """Whether a property's `schema` accepts `value` (a missing property accepts nothing)."""
    if not isinstance(schema, dict):
        return False
    try:
        return validators.validator_for(schema)(schema).is_valid(value)
    except Exception:  # noqa: BLE001 - a schema the validator cannot apply is one we do not pin into
        return False
