"""How to denoise a response (`SamplerSettings`): the one definition the CLI, the studio, generation and the store
share, with each setting's help text and range.

Kept apart from the sampler (no torch here) so the CLI builds `generate`'s options from it without loading torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, setting, whole_in
from wmstudio.world.grounding import GROUNDINGS, NONE

MAX_CANVAS_TOKENS = 4096  # the longest response canvas (its slots and anchors)

STRATEGIES = ("low_confidence", "margin", "entropy", "random")
DEFAULT_THRESHOLD = 0.9
MAX_SAMPLES = 8
MAX_STEPS = 512
MAX_TEMPERATURE = 5.0
MAX_REPETITION_PENALTY = 5.0


@dataclass(frozen=True)
class SamplerSettings:
    """How to denoise a response: the one definition the CLI, the studio, generation and the store share.

    Out-of-range values raise InvalidInput naming the setting; `help(name)` is the text the CLI and UI show."""

    steps: int | None = setting(None, "Step budget (None: about one step per 4 masked slots).")
    strategy: str = setting("low_confidence", "How a slot's confidence is scored: " + "|".join(STRATEGIES) + ".")
    threshold: float | None = setting(DEFAULT_THRESHOLD, "Also commit every slot at least this confident "
                                                          "(None: the linear schedule only, as LLaDA).")
    block: int | None = setting(None, "Slots per left-to-right block (None: one block).")
    temperature: float = setting(0.0, "Gumbel-noise temperature (0 = greedy).")
    repetition_penalty: float = setting(1.0, "CTRL penalty on tokens already in the response, e.g. 1.3.")
    samples: int = setting(1, f"K samples, denoised as one batch (1-{MAX_SAMPLES}).")
    seed: int = setting(0, "Random seed: same seed, same response.")
    free: bool = setting(False, "One free span instead of the response-schema skeleton.")
    free_length: int = setting(64, "Slots of the free span (free mode).")
    repair: bool = setting(False, "Repair a response that fails a check: set fields a failed rule states as an "
                                   "equality, remask the fields the failed rules read and denoise them again, the "
                                   "rest held (a few rounds of 4 candidates).")
    outcome_head: bool = setting(True, "Let the model's outcome head choose the status and error code from the call "
                                        "and the state before denoising (off: the canvas decides them).")
    copy_head: bool = setting(True, "Let the model's copy head fill values the prompt shows (off: the denoiser "
                                     "alone writes every value).")
    grounding: str = setting(NONE, "What the prompt may hold beyond the five parts: none (the world model tracks "
                                    "the state from the initial state and the history) or oracle (a simulator's "
                                    "replayed state and retrieval, named as the oracle's).")
    retrieval: bool = setting(True, "Show a listing's records found in the initial state by the call's arguments "
                                     "(the prompt's computed query state; no simulator is read).")

    def __post_init__(self) -> None:
        problems: list[Problem] = []

        def whole(name: str, low: int, high: int, none_ok: bool = False) -> None:
            value = getattr(self, name)
            if value is None and none_ok:
                return
            if not whole_in(value, low, high):
                empty = " (or empty for automatic)" if none_ok else ""
                problems.append(Problem(name, f"must be a whole number from {low} to {high}{empty}, got {value!r}"))

        def number(name: str, low: float, high: float, none_ok: bool = False) -> None:
            value = getattr(self, name)
            if value is None and none_ok:
                return
            if not number_in(value, low, high):
                problems.append(Problem(name, f"must be a number from {low:g} to {high:g}, got {value!r}"))

        whole("steps", 1, MAX_STEPS, none_ok=True)
        if self.strategy not in STRATEGIES:
            problems.append(Problem("strategy", f"{self.strategy!r} is not known: use one of {', '.join(STRATEGIES)}"))
        number("threshold", 0.0, 1.0, none_ok=True)
        whole("block", 1, MAX_CANVAS_TOKENS, none_ok=True)
        number("temperature", 0.0, MAX_TEMPERATURE)
        number("repetition_penalty", 1.0, MAX_REPETITION_PENALTY)
        whole("samples", 1, MAX_SAMPLES)
        whole("seed", 0, 2**63 - 1)
        if self.grounding not in GROUNDINGS:
            problems.append(Problem("grounding", f"{self.grounding!r} is not a grounding: use "
                                                 f"{' or '.join(GROUNDINGS)}"))
        for name in ("free", "repair", "outcome_head", "copy_head", "retrieval"):
            if not isinstance(getattr(self, name), bool):
                problems.append(Problem(name, f"must be true or false, got {getattr(self, name)!r}"))
        whole("free_length", 1, MAX_CANVAS_TOKENS)
        if problems:
            raise InvalidInput(problems)

    @classmethod
    def help(cls, name: str) -> str:
        """The help text of one setting."""
        return next(f.metadata["help"] for f in fields(cls) if f.name == name)

    @classmethod
    def from_form(cls, **values: Any) -> SamplerSettings:
        """Settings from form widgets, where numbers may arrive as floats or text and 0 or empty
        steps/block/threshold mean automatic / one block / off. Unknown names are refused."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidInput(Problem(unknown[0], f"not a sampler setting: use {', '.join(sorted(known))}"))
        clean: dict[str, Any] = {}
        for name, value in values.items():
            if name in ("steps", "block"):
                clean[name] = _whole_or_none(value)
            elif name == "threshold":
                clean[name] = None if value in (None, "", 0) else _number(value)
            elif name in ("temperature", "repetition_penalty"):
                clean[name] = _number(value) if value is not None else getattr(cls, name)
            elif name in ("samples", "seed", "free_length"):
                clean[name] = _whole(value) if value is not None else getattr(cls, name)
            elif name == "strategy":
                clean[name] = value or STRATEGIES[0]
            elif name == "grounding":
                clean[name] = value or NONE
            else:
                clean[name] = bool(value)
        return cls(**clean)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SETTING_NAMES = tuple(f.name for f in fields(SamplerSettings))


def _whole(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _whole_or_none(value: Any) -> Any:
    value = _whole(value)
    return None if value in (None, "", 0) else value


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value
