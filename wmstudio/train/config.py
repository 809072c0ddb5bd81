"""The settings of a world-model training run: one dataclass, validated, each field with its help text.

Kept apart from the trainer (no torch here) so `wmstudio train-wm --help` is generated from it cheaply."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.problems import InvalidInput, Problem


def _option(default: Any, help: str) -> Any:
    return field(default=default, metadata={"help": help})


@dataclass
class TrainConfig:
    """Everything a training run depends on; saved into `training.json` beside the weights.

    Each field's help text is what `wmstudio train-wm --help` shows: the command is generated from this class."""

    REQUIRED = ("corpus", "out")

    corpus: Path = _option(None, "Folder with train.jsonl (and eval.jsonl) chat rows, e.g. from `wmstudio corpus`.")
    out: Path = _option(None, "Model folder to write, e.g. assets/models/wm-mdlm-small.")
    arch: str = _option("mdlm", "mdlm (masked diffusion) or ar (autoregressive baseline).")
    minutes: float = _option(50.0, "Wall-clock budget of the training loop in minutes (data preparation comes "
                                   "before it); the learning-rate schedule ends with it.")
    steps: int | None = _option(None, "Stop after this many optimizer steps (whichever comes first).")
    seed: int = _option(0, "Seed for initialisation, batching and noise.")
    base: str | None = _option(None, "Fine-tune this checkpoint (folder or hub id) instead of a new model.")
    vocab_size: int = _option(4096, "Tokenizer vocabulary of a new model (BPE trained on the corpus).")
    layers: int = _option(4, "Transformer layers of a new model.")
    hidden: int = _option(128, "Width of a new model.")
    heads: int = _option(4, "Attention heads of a new model.")
    ffn: int = _option(512, "Feed-forward width of a new model.")
    max_positions: int = _option(3072, "Context length (prompt + canvas) in tokens.")
    prompt_tokens: int = _option(768, "Tokens a prompt is rendered within (call-local state, newest turns first).")
    copy_head: bool = _option(True, "Train a copy head beside an MDLM (fills values the prompt shows).")
    outcome_head: bool = _option(True, "Fit an outcome head beside an MDLM (chooses status and error code from "
                                       "the call and the state; about two minutes on 16k rows).")
    copy_weight: float = _option(1.0, "Weight of the copy head's loss beside the denoising loss.")
    outcome_first: float = _option(0.25, "Share of skeleton canvases wholly masked with the outcome (`status`) "
                                         "weighted as much as the other values: the model learns to decide the "
                                         "outcome from the prompt, and its sampler settles the outcome first "
                                         "(0: off).")
    shape_share: float = _option(0.0, "Experimental: share of rows that also teach an MDLM to write its tool's "
                                      "response shape (a sketch of the schema) from the tool's short prompt without "
                                      "that schema, so a tool imported without one could get a skeleton (0: off; at "
                                      "0.5 the 1.6M model's seventh stage still sketched 1 of 19 tools right).")
    batch_tokens: int = _option(6144, "About this many tokens per optimizer step.")
    learning_rate: float = _option(2e-3, "Peak learning rate (AdamW, cosine decay after warm-up).")
    warmup_steps: int = _option(30, "Linear warm-up steps.")
    weight_decay: float = _option(0.01, "AdamW weight decay.")
    max_rows: int | None = _option(None, "Use only the first N training rows.")
    eval_rows: int = _option(24, "Held-out rows (eval split) for the loss curve.")
    eval_every_s: float = _option(600.0, "Seconds between held-out loss measurements.")
    threads: int | None = _option(None, "CPU threads for torch (default: torch's choice).")
    loader_workers: int = _option(0, "Processes that build batches ahead of the training loop: worth it on a GPU, "
                                     "which outruns one process (0: the loop builds them, so one seed gives one "
                                     "run).")
    device: str | None = _option(None, "cpu, cuda or mps (default: cuda when present).")
    note: str = _option("", "What this training stage changes, in a few words: kept in the model's lineage and "
                            "shown on its card.")

    def __post_init__(self) -> None:
        missing = [name for name in ("corpus", "out") if getattr(self, name) is None]
        if missing:
            raise InvalidInput([Problem(name, "required: give a folder") for name in missing])
        self.corpus, self.out = Path(self.corpus), Path(self.out)
        if isinstance(self.outcome_first, bool) or not isinstance(self.outcome_first, (int, float)) \
                or not 0.0 <= self.outcome_first <= 1.0:
            raise InvalidInput(Problem("outcome_first", f"must be a share from 0 to 1, got {self.outcome_first!r}"))
        if isinstance(self.shape_share, bool) or not isinstance(self.shape_share, (int, float)) \
                or not 0.0 <= self.shape_share <= 1.0:
            raise InvalidInput(Problem("shape_share", f"must be a share from 0 to 1, got {self.shape_share!r}"))
        if isinstance(self.loader_workers, bool) or not isinstance(self.loader_workers, int) \
                or self.loader_workers < 0:
            raise InvalidInput(Problem("loader_workers", f"must be a whole number from 0, got {self.loader_workers!r}"))
