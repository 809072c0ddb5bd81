"""The settings of a world-model training run: one dataclass, validated, each field with its help text.

Kept apart from the trainer (no torch here) so `wmstudio train-wm --help` is generated from it cheaply."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, setting, whole_in


@dataclass
class TrainConfig:
    """Everything a training run depends on; saved into `training.json` beside the weights.

    Each field's help text is what `wmstudio train-wm --help` shows: the command is generated from this class."""

    REQUIRED = ("corpus", "out")

    corpus: Path = setting(None, "Folder with train.jsonl (and eval.jsonl) chat rows, e.g. from `wmstudio corpus`.")
    out: Path = setting(None, "Model folder to write, e.g. assets/models/wm-mdlm-small.")
    arch: str = setting("mdlm", "mdlm (masked diffusion) or ar (autoregressive baseline).")
    minutes: float = setting(50.0, "Wall-clock budget of the training loop in minutes (data preparation comes "
                                   "before it); the learning-rate schedule ends with it.")
    steps: int | None = setting(None, "Stop after this many optimizer steps (whichever comes first).")
    seed: int = setting(0, "Seed for initialisation, batching and noise.")
    base: str | None = setting(None, "Fine-tune this checkpoint (folder or hub id) instead of a new model.")
    vocab_size: int = setting(4096, "Tokenizer vocabulary of a new model (BPE trained on the corpus).")
    layers: int = setting(4, "Transformer layers of a new model.")
    hidden: int = setting(128, "Width of a new model.")
    heads: int = setting(4, "Attention heads of a new model.")
    ffn: int = setting(512, "Feed-forward width of a new model.")
    max_positions: int = setting(3072, "Context length (prompt + canvas) in tokens.")
    prompt_tokens: int = setting(768, "Tokens a prompt is rendered within (call-local state, newest turns first).")
    copy_head: bool = setting(True, "Train a copy head beside an MDLM (fills values the prompt shows).")
    outcome_head: bool = setting(True, "Fit an outcome head beside an MDLM (chooses status and error code from "
                                       "the call and the state; about two minutes on 16k rows).")
    copy_weight: float = setting(1.0, "Weight of the copy head's loss beside the denoising loss.")
    outcome_first: float = setting(0.25, "Share of skeleton canvases wholly masked with the outcome (`status`) "
                                         "weighted as much as the other values: the model learns to decide the "
                                         "outcome from the prompt, and its sampler settles the outcome first "
                                         "(0: off).")
    shape_share: float = setting(0.0, "Experimental: share of rows that also teach an MDLM to write its tool's "
                                      "response shape (a sketch of the schema) from the tool's short prompt without "
                                      "that schema, so a tool imported without one could get a skeleton (0: off; at "
                                      "0.5 the 1.6M model's seventh stage still sketched 1 of 19 tools right).")
    batch_tokens: int = setting(6144, "About this many tokens per optimizer step.")
    learning_rate: float = setting(2e-3, "Peak learning rate (AdamW, cosine decay after warm-up).")
    warmup_steps: int = setting(30, "Linear warm-up steps.")
    weight_decay: float = setting(0.01, "AdamW weight decay.")
    max_rows: int | None = setting(None, "Use only the first N training rows.")
    eval_rows: int = setting(24, "Held-out rows (eval split) for the loss curve.")
    eval_every_s: float = setting(600.0, "Seconds between held-out loss measurements.")
    threads: int | None = setting(None, "CPU threads for torch (default: torch's choice).")
    loader_workers: int = setting(0, "Processes that build batches ahead of the training loop: worth it on a GPU, "
                                     "which outruns one process (0: the loop builds them, so one seed gives one "
                                     "run).")
    device: str | None = setting(None, "cpu, cuda or mps (default: cuda when present).")
    note: str = setting("", "What this training stage changes, in a few words: kept in the model's lineage and "
                            "shown on its card.")
    resume: bool = setting(False, "Go on with the unfinished run whose checkpoint is in --out (same settings): "
                                  "weights, optimizer, schedule and batch order continue where it stopped.")
    sitting_minutes: float | None = setting(None, "End this sitting after this many minutes of training with a "
                                                  "checkpoint in --out; `--resume` goes on later (the schedule "
                                                  "still spans --steps / --minutes).")
    sitting_steps: int | None = setting(None, "End this sitting after this many more optimizer steps, with a "
                                              "checkpoint (as --sitting-minutes).")
    checkpoint_minutes: float = setting(15.0, "Minutes between checkpoints while training, so a run that is killed "
                                              "loses at most this much (0: only when a sitting ends).")

    def __post_init__(self) -> None:
        missing = [name for name in ("corpus", "out") if getattr(self, name) is None]
        if missing:
            raise InvalidInput([Problem(name, "required: give a folder") for name in missing])
        self.corpus, self.out = Path(self.corpus), Path(self.out)
        if not number_in(self.outcome_first, 0.0, 1.0):
            raise InvalidInput(Problem("outcome_first", f"must be a share from 0 to 1, got {self.outcome_first!r}"))
        if not number_in(self.shape_share, 0.0, 1.0):
            raise InvalidInput(Problem("shape_share", f"must be a share from 0 to 1, got {self.shape_share!r}"))
        if self.sitting_minutes is not None and not number_in(self.sitting_minutes, above=0):
            raise InvalidInput(Problem("sitting_minutes", f"must be above 0, got {self.sitting_minutes!r}"))
        if self.sitting_steps is not None and not whole_in(self.sitting_steps, 1):
            raise InvalidInput(Problem("sitting_steps", f"must be a whole number from 1, got {self.sitting_steps!r}"))
        if not number_in(self.checkpoint_minutes, 0.0):
            raise InvalidInput(Problem("checkpoint_minutes", f"must be 0 or more, got {self.checkpoint_minutes!r}"))
        if not whole_in(self.loader_workers, 0):
            raise InvalidInput(Problem("loader_workers", f"must be a whole number from 0, got {self.loader_workers!r}"))
