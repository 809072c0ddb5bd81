"""How to denoise a response (`SamplerSettings`): the one definition the CLI, the studio, generation and the store
share, with each setting's help text and range.

Kept apart from the sampler (no torch here) so the CLI builds `generate`'s options from it without loading torch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from wmstudio.model.canvas.limits import MAX_CANVAS_TOKENS
from wmstudio.model.denoising.strategies import STRATEGIES
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import form_value, setting, setting_problems, setting_specs
from wmstudio.world.grounding import GROUNDINGS, NONE, Grounding

DEFAULT_THRESHOLD = 0.9
MAX_SAMPLES = 8
MAX_STEPS = 512
MAX_TEMPERATURE = 5.0
MAX_REPETITION_PENALTY = 5.0
MAX_SEED = 2**63 - 1


@dataclass(frozen=True)
class SamplerSettings:
    """How to denoise a response: the one definition the CLI, the studio, generation and the store share.

    Each field declares its label, help, range, choices and what 0 means (settings.py): the CLI's options, the
    Simulate widgets and the named API's parameters are built from them. Out-of-range values raise InvalidInput
    naming the setting; 0 where it means automatic or off is kept as None."""

    steps: int | None = setting(None, "Denoising steps; 0 = about one step per 4 masked slots.", label="Steps",
                                low=1, high=MAX_STEPS, zero="automatic")
    strategy: str = setting("low_confidence", "How a slot's confidence is scored: " + "|".join(STRATEGIES) + ".",
                            label="Strategy", choices=STRATEGIES)
    threshold: float | None = setting(DEFAULT_THRESHOLD, "Also commit every slot at least this confident; 0 = off "
                                                         "(the linear schedule only, as LLaDA).",
                                      label="Confidence threshold", low=0.0, high=1.0, zero="off", step=0.05)
    block: int | None = setting(None, "Slots per left-to-right block; 0 = one block.", label="Block size", low=1,
                                high=MAX_CANVAS_TOKENS, zero="one block")
    temperature: float = setting(0.0, "Gumbel-noise temperature (0 = greedy).", label="Temperature", low=0.0,
                                 high=MAX_TEMPERATURE)
    repetition_penalty: float = setting(1.0, "CTRL penalty on tokens already in the response, e.g. 1.3 (1 = none).",
                                        label="Repetition penalty", low=1.0, high=MAX_REPETITION_PENALTY)
    samples: int = setting(1, "K samples, denoised as one batch.", label="Samples", low=1, high=MAX_SAMPLES)
    seed: int = setting(0, "Random seed: same seed, same response.", label="Seed", low=0, high=MAX_SEED)
    free: bool = setting(False, "One free span instead of the response-schema skeleton.",
                         label="Free mode (ignore the response schema)")
    free_length: int = setting(64, "Slots of the free span (free mode).", label="Free length (tokens)", low=1,
                               high=MAX_CANVAS_TOKENS)
    repair: bool = setting(False, "Repair a response that fails a check: set fields a failed rule states as an "
                                  "equality, remask the fields the failed rules read and denoise them again, the "
                                  "rest held (a few rounds of 4 candidates).",
                           label="Repair with the rules (remask what a failed check reads)")
    outcome_head: bool = setting(True, "Let the model's outcome head choose the status and error code from the call "
                                       "and the state before denoising (off: the canvas decides them).",
                                 label="Outcome head (status and error code chosen from the call and state first)")
    copy_head: bool = setting(True, "Let the model's copy head fill values the prompt shows (off: the denoiser "
                                    "alone writes every value).",
                              label="Copy head (values the prompt shows copied whole)")
    record_copy: bool = setting(True, "Copy the record the call names whole, or the page a list call answers "
                                      "with: values offered to the copy head from the state (never cut by the "
                                      "prompt's budget), arrays, maps and nulls laid out on the canvas, the fields "
                                      "of the records it refers to, the identifiers the call sends echoed into "
                                      "their fields, and on an ok answer the other arguments it names (off: only "
                                      "what the prompt shows).",
                                label="Record copy (the named record's values and shape)")
    rule_outcomes: bool = setting(True, "Try the outcome head's choices against the world's rules before writing: "
                                        "an outcome a rule refuses whatever the other fields hold (an order not "
                                        "pending, cancelled ok) gives way to the next (off: the head's own order).",
                                  label="Rules check the outcome")
    rule_fields: bool = setting(True, "Write the fields the world's rules fix under the chosen outcome before "
                                      "denoising: a value a rule's equality computes (`remaining` after a "
                                      "withdrawal, the new status, a time 2 hours on), a flag it needs, a token "
                                      "drawn in the shape its pattern states (off: the model writes them).",
                                label="Rules fix their fields")
    grounding: Grounding = setting(NONE, "What the prompt may hold beyond the five parts: none (the world model "
                                         "tracks the state from the initial state and the history) or oracle (a "
                                         "simulator's replayed state and retrieval, named as the oracle's).",
                                   label="Grounding", choices=GROUNDINGS)
    retrieval: bool = setting(True, "Show a listing's records found in the initial state by the call's arguments "
                                    "(the prompt's computed query state; no simulator is read).",
                              label="Computed query state (a listing's records found in the initial state)")

    def __post_init__(self) -> None:
        for spec in setting_specs(SamplerSettings):
            value = getattr(self, spec.name)
            if spec.zero and value == 0 and not isinstance(value, bool):
                object.__setattr__(self, spec.name, None)  # 0 means automatic / off: kept as None
        if isinstance(self.grounding, str) and self.grounding in GROUNDINGS:
            object.__setattr__(self, "grounding", Grounding(self.grounding))
        problems = [Problem(name, message) for name, message in setting_problems(self)]
        if problems:
            raise InvalidInput(problems)

    @classmethod
    def help(cls, name: str) -> str:
        """The help text of one setting."""
        return next(spec.help for spec in setting_specs(cls) if spec.name == name)

    @classmethod
    def from_form(cls, **values: Any) -> SamplerSettings:
        """Settings from form widgets, text or JSON, read the same way for every door (`settings.form_value`): a
        whole number may come as 2.0 or "2", 0 means automatic or off where it does. Unknown names are refused."""
        specs = {spec.name: spec for spec in setting_specs(cls)}
        unknown = sorted(set(values) - set(specs))
        if unknown:
            raise InvalidInput(Problem(unknown[0], f"not a sampler setting: use {', '.join(sorted(specs))}"))
        return cls(**{name: form_value(specs[name], value) for name, value in values.items()})

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


SETTING_NAMES = tuple(f.name for f in fields(SamplerSettings))
