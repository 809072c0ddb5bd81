"""Training the embedded world models: the masked-diffusion (MDLM) objective, the AR baseline, one loop.

`train_world_model` reads a corpus folder, trains a tokenizer and a small transformers-native model on
CPU within a time budget (or fine-tunes a `--base` checkpoint on a GPU) and saves a folder that loads
with the Auto classes: config + safetensors + tokenizer + `training.json` + a model card."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache

from wmstudio.model.canvas.canvas import OUTCOME_KEY
from wmstudio.model.heads.copy_head import CopyHead, load_copy_head
from wmstudio.model.heads.outcome_head import CONFIG_FILE as OUTCOME_CONFIG_FILE
from wmstudio.model.heads.outcome_head import HEAD_FILE as OUTCOME_HEAD_FILE
from wmstudio.model.heads.outcome_messages import TEMPLATES_FILE
from wmstudio.model.network.architecture import MDLM, model_kind
from wmstudio.model.network.trained_schemas import SCHEMAS_FILE
from wmstudio.model.serving.backends import READ_PROMPT_TOKENS, CanvasCache
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.world_model.batch_stream import BatchStream, stream_batches
from wmstudio.train.world_model.batches import Batch, SplitBatch, make_batch, plan_batches
from wmstudio.train.world_model.checkpoint import (
    RunProgress,
    check_start,
    checkpoint_folder,
    load_checkpoint,
    remove_checkpoint,
    save_checkpoint,
    sitting_over,
    start_sitting,
    stop_requests,
)
from wmstudio.train.world_model.config import TrainConfig
from wmstudio.train.world_model.examples import CorpusRow, build_examples, read_corpus_split
from wmstudio.train.world_model.model_card import corpus_stats, write_model_card
from wmstudio.train.world_model.outcome_fitting import fit_outcome_head
from wmstudio.train.world_model.trained_schema_writing import write_trained_schemas

ARCHITECTURES = ("mdlm", "ar")
TOKENIZER_PROMPTS = 1500  # prompts sampled for tokenizer training (all responses are used)


@dataclass
class TrainResult:
    """What a run produced: where, how long, how many steps and tokens, and the loss curve."""

    out: Path
    arch: str
    steps: int
    seconds: float
    tokens_seen: int
    examples: int
    parameters: int
    checkpoint_bytes: int
    loss_curve: list[dict] = field(default_factory=list)  # {"step", "seconds", "train_loss", "eval_loss"?}
    finished: bool = True  # False: a sitting ended with a checkpoint, and `resume` goes on
    sittings: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        data = asdict(self)
        data["out"] = str(self.out)
        return data


@dataclass
class StepLoss:
    """One batch's objective: the total to minimise, its denoising and copy parts, and how many of the
    copy head's spans it got right (argmax on the right candidate, or on generate when none holds the value)."""

    total: torch.Tensor
    denoise: float
    copy: float | None = None
    copy_spans: int = 0
    copy_right: int = 0


def batch_loss(model, batch: Batch | SplitBatch, head: CopyHead | None = None, copy_weight: float = 1.0) -> StepLoss:
    """Weighted cross-entropy at the scored positions (the output head runs on those only: exact, and most of a
    small model's step), plus the copy head's loss on the batch's wholly masked spans."""
    if isinstance(batch, SplitBatch):
        return split_batch_loss(model, batch, head, copy_weight)
    device = next(model.parameters()).device
    outputs = model.base_model(
        input_ids=batch.input_ids.to(device),
        position_ids=batch.position_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        use_cache=False,
    )
    loss = _denoise_loss(model, outputs.last_hidden_state, batch, device)
    return StepLoss(loss, loss.item())


def split_batch_loss(model, batch: SplitBatch, head: CopyHead | None = None, copy_weight: float = 1.0) -> StepLoss:
    """The MDLM loss in two passes: the prompts once (causal), then every canvas over its prompt's keys/values.

    Exactly the packed loss (a prefix-causal prompt never sees a canvas), but attention costs prompt^2/2 +
    canvases x (prompt + canvas) instead of (prompt + all canvases)^2, which dominates on a small model."""
    device = next(model.parameters()).device
    base = model.base_model
    prompts = base(input_ids=batch.prompts.to(device), cache=DynamicCache(config=model.config), use_cache=True)
    cache = getattr(prompts, "cache", None) or prompts.past_key_values
    owners = batch.owners.to(device)
    layers = [(layer.keys.index_select(0, owners), layer.values.index_select(0, owners)) for layer in cache.layers]
    rows, length = batch.canvases.shape
    prompt_len = batch.prompts.shape[1]
    own_prompt = batch.prompt_lengths.to(device)[owners]
    keys = torch.arange(prompt_len + length, device=device).view(1, -1)
    visible = torch.where(keys < prompt_len, keys < own_prompt.view(-1, 1),
                          keys - prompt_len < batch.canvas_lengths.to(device).view(-1, 1))
    mask = visible.view(rows, 1, 1, -1).expand(rows, 1, length, prompt_len + length)
    positions = own_prompt.view(-1, 1) + torch.arange(length, device=device).view(1, -1)
    outputs = base(input_ids=batch.canvases.to(device), cache=CanvasCache(layers, rows, length),
                   position_ids=positions, attention_mask=mask, use_cache=True)
    hidden = outputs.last_hidden_state
    denoise = _denoise_loss(model, hidden, batch, device)
    if head is None or batch.copy is None:
        return StepLoss(denoise, denoise.item())
    copy = batch.copy
    logits = head(hidden[copy.rows.to(device), copy.cols.to(device)], copy.span_keys.to(device),
                  copy.kinds.to(device), copy.features.to(device), copy.cand_keys.to(device), copy.mask.to(device))
    copy_loss, right = copy_objective(logits.float(), copy.hits.to(device))
    return StepLoss(denoise + copy_weight * copy_loss, denoise.item(), copy_loss.item(), len(copy.rows), right)


def copy_objective(logits: torch.Tensor, hits: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(mean of -log p(any right choice), how many spans the argmax gets right): the pointer-generator's
    marginal likelihood, where every candidate holding the true value counts as right."""
    log_probs = torch.log_softmax(logits, dim=-1)
    right = torch.logsumexp(log_probs.masked_fill(~hits, -math.inf), dim=-1)
    chosen = hits.gather(1, logits.argmax(dim=-1, keepdim=True)).squeeze(1)
    return -right.mean(), int(chosen.sum())


def _denoise_loss(model, hidden: torch.Tensor, batch: Batch | SplitBatch, device) -> torch.Tensor:
    scored = hidden[batch.loss_rows.to(device), batch.loss_cols.to(device)]
    logits = model.get_output_embeddings()(scored).float()
    losses = F.cross_entropy(logits, batch.targets.to(device), reduction="none")
    return (losses * batch.weights.to(device)).sum()


def uses_split_batches(model, arch: str) -> bool:
    """Our own prefix-causal MDLMs train with the two-pass loss; other checkpoints keep packed rows."""
    return arch == MDLM and model_kind(model.config) == MDLM


def learning_rate(config: TrainConfig, step: int, progress: float) -> float:
    """Linear warm-up over `warmup_steps`, then cosine decay to 10% over the run's progress (0..1).

    Progress is the larger of steps done/steps and seconds spent/budget, so a time-limited run on a
    busy machine still ends its schedule when its minutes are up."""
    warm = min(1.0, (step + 1) / max(config.warmup_steps, 1))
    cosine = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return config.learning_rate * warm * cosine


def prepare_model_and_tokenizer(config: TrainConfig, rows: list[CorpusRow]):
    """A fresh tokenizer (trained on the rows) and a random small model, or the `--base` checkpoint.

    A base checkpoint keeps its tokenizer; the canvas's special tokens are added when it lacks them
    and the embeddings grow to match, so any transformers causal LM can be fine-tuned as a denoiser."""
    from wmstudio.model.network.architecture import model_marker, new_model
    from wmstudio.model.network.tokenizer import SPECIAL_TOKENS, train_tokenizer

    device = config.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if config.base is None:
        sample = rows[:: max(1, len(rows) // TOKENIZER_PROMPTS)]
        texts = [row.response_text for row in rows] + [row.prompt_text for row in sample]
        tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
        model = new_model(tokenizer, kind=config.arch, layers=config.layers, hidden=config.hidden,
                          heads=config.heads, ffn=config.ffn, max_positions=config.max_positions)
        return model.to(device), tokenizer
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(config.base)
        model = AutoModelForCausalLM.from_pretrained(config.base)
    except (OSError, ValueError) as err:
        raise InvalidInput(Problem("base", f"cannot load {config.base!r} ({err}): give a local folder or a hub id "
                                           "of a transformers causal LM")) from None
    mask, pad, bos, eos, sep = SPECIAL_TOKENS
    wanted = {"mask_token": mask, "pad_token": pad, "bos_token": bos, "eos_token": eos, "sep_token": sep}
    missing = {role: token for role, token in wanted.items() if getattr(tokenizer, role) is None}
    if missing:
        tokenizer.add_special_tokens(missing)
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.config.wmstudio = model_marker(tokenizer, config.arch)
    model.config.max_position_embeddings = max(getattr(model.config, "max_position_embeddings", 0) or 0,
                                               config.max_positions)
    if device.startswith("cuda"):
        model = model.to(torch.bfloat16)
    return model.to(device), tokenizer


def _special_ids(tokenizer) -> dict[str, int]:
    ids = {"mask": tokenizer.mask_token_id, "pad": tokenizer.pad_token_id}
    missing = [name for name, value in ids.items() if value is None]
    if missing:
        raise InvalidInput(Problem("tokenizer", f"has no {' or '.join(missing)} token: train it with train_tokenizer"))
    return ids


@torch.no_grad()
def evaluate_loss(model, head: CopyHead | None, examples, arch, ids, batch_tokens, seed: int) -> dict[str, float]:
    """Held-out objective with fixed noise (same seed, same masks), for the loss curve: the denoising loss and,
    with a copy head, its loss and the share of wholly masked spans it fills right."""
    model.eval()
    if head is not None:
        head.eval()
    rng = torch.Generator().manual_seed(seed)
    total, count, copy_total, spans, right = 0.0, 0, 0.0, 0, 0
    for indices in plan_batches(examples, arch, batch_tokens, seed):
        batch = make_batch([examples[i] for i in indices], arch, ids, rng, split=uses_split_batches(model, arch))
        loss = batch_loss(model, batch, head)
        total += loss.denoise * len(indices)
        count += len(indices)
        if loss.copy is not None:
            copy_total += loss.copy * loss.copy_spans
            spans, right = spans + loss.copy_spans, right + loss.copy_right
    model.train()
    if head is not None:
        head.train()
    figures = {"eval_loss": round(total / max(count, 1), 4)}
    if spans:
        figures.update(eval_copy_loss=round(copy_total / spans, 4), eval_copy_accuracy=round(right / spans, 4))
    return figures


def base_lineage(base: str | None) -> list[dict]:
    """The training stages behind a `--base` checkpoint of ours, oldest first (its own lineage, then its run), so a
    model continued several times still says what it took in all; [] for a new model or a foreign checkpoint."""
    record = Path(base) / "training.json" if base else None
    if record is None or not record.is_file():
        return []
    try:
        earlier = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    config = earlier.get("config") or {}
    evals = [p["eval_loss"] for p in earlier.get("loss_curve") or [] if "eval_loss" in p]
    stage = {"base": config.get("base"), "steps": earlier.get("steps"), "tokens_seen": earlier.get("tokens_seen"),
             "minutes": round(float(earlier.get("seconds") or 0) / 60, 1), "seed": config.get("seed"),
             "learning_rate": config.get("learning_rate"), "outcome_first": config.get("outcome_first", 0.0),
             "shape_share": config.get("shape_share", 0.0), "eval_loss": [evals[0], evals[-1]] if evals else None,
             "corpus": Path(str(config.get("corpus") or "")).name, "note": config.get("note") or ""}
    return [*(earlier.get("lineage") or []), stage]


def _directory_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def train_world_model(
    config: TrainConfig,
    progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train (or fine-tune) a world model on a corpus folder and save it to `config.out`.

    Stops when `steps` are done or `minutes` are spent, whichever comes first; `progress(done, total)`
    counts per-mille of the run, `log(text)` gets a line per report (loss, tokens/s). A sitting that ends
    first (`sitting_minutes`, `sitting_steps`, or SIGTERM / Ctrl-C) leaves a checkpoint that `resume` goes on
    from (checkpoint.py); the result then says `finished` False and no model is saved yet."""
    if config.arch not in ARCHITECTURES:
        raise InvalidInput(Problem("arch", f"{config.arch!r} is not known: use mdlm or ar"))
    if config.minutes <= 0 and not config.steps:
        raise InvalidInput(Problem("minutes", "give a positive --minutes or a --steps count"))
    check_start(config)
    say = log or (lambda text: None)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()

    train_rows = read_corpus_split(config.corpus, "train", config.max_rows)
    eval_rows = read_corpus_split(config.corpus, "eval", config.eval_rows, required=False)
    resumed = None
    if config.resume:
        resumed = load_checkpoint(config, config.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        model, tokenizer = resumed.model, resumed.tokenizer
    else:
        model, tokenizer = prepare_model_and_tokenizer(config, train_rows)
    device = next(model.parameters()).device
    if device.type == "cuda":  # fp32 weights, TF32 matrix products: the small models are launch-bound there anyway
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    ids = _special_ids(tokenizer)
    copy = config.copy_head and config.arch == MDLM and uses_split_batches(model, config.arch)
    workers = max(1, min(config.threads or (os.cpu_count() or 1), os.cpu_count() or 1))
    shapes = config.shape_share if config.arch == MDLM else 0.0
    train = build_examples(train_rows, tokenizer, config.arch, config.max_positions, config.prompt_tokens,
                           seed=config.seed, copy=copy, workers=workers, shape_share=shapes)
    held_out = build_examples(eval_rows, tokenizer, config.arch, config.max_positions, config.prompt_tokens,
                              seed=config.seed + 1, copy=copy, shape_share=shapes)
    if not train.examples:
        raise InvalidInput(Problem(str(config.corpus), "no usable training rows: " + "; ".join(train.skipped[:3])))
    say(f"{len(train.examples)} training examples ({len(train.skipped)} rows skipped), {len(held_out.examples)} "
        f"held out; {train.copy_spans:,} copy spans ({train.copy_hits:,} with a candidate holding the value); "
        f"{train.shape_canvases:,} rows teach their tool's shape; "
        f"data ready in {time.perf_counter() - started:.0f}s")
    head = None
    if copy:  # a base checkpoint of ours (or this run's checkpoint) goes on training its own copy head
        head_folder = resumed.folder if resumed else Path(config.base) if config.base else None
        saved = load_copy_head(head_folder, device) if head_folder and head_folder.is_dir() else None
        head = saved.train() if saved is not None else CopyHead(model.config.hidden_size).to(device)
    parameters = list(model.parameters()) + (list(head.parameters()) if head is not None else [])
    optimizer = torch.optim.AdamW(parameters, lr=config.learning_rate, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.98))
    if resumed:
        optimizer.load_state_dict(resumed.optimizer_state)
    run = resumed.progress if resumed else RunProgress()
    sitting = start_sitting(run)
    budget = config.minutes * 60 if config.minutes > 0 else math.inf
    loop_start = time.perf_counter()
    last_eval = last_save = loop_start
    spent = run.seconds  # training seconds of earlier sittings
    if held_out.examples and not resumed:
        run.curve.append({"step": 0, "seconds": 0.0, **evaluate_loss(model, head, held_out.examples, config.arch,
                                                                       ids, config.batch_tokens, config.seed)})
    model.train()
    stream = BatchStream(train.examples, config.arch, ids, config.batch_tokens, config.seed,
                         split=uses_split_batches(model, config.arch), outcome_first=config.outcome_first,
                         start=(run.epoch, run.batch_index), noise_state=resumed.noise_state if resumed else None)
    batches = stream_batches(stream, config.loader_workers)

    cpu_start = time.process_time()

    def end_sitting() -> None:
        sitting.update(steps=run.step - first_step, seconds=round(time.perf_counter() - loop_start, 1),
                       cpu_seconds=round(time.process_time() - cpu_start, 1))

    def checkpoint() -> None:
        end_sitting()
        run.seconds = round(spent + time.perf_counter() - loop_start, 1)
        save_checkpoint(config, model, tokenizer, head, optimizer, stream.noise, run)

    first_step, finished = run.step, False
    with stop_requests() as stopping:
        while True:  # the checks come before a batch is drawn, so a checkpoint's stream has used no batch unseen
            now = time.perf_counter()
            fraction = max((spent + now - loop_start) / budget, run.step / config.steps if config.steps else 0.0)
            if fraction >= 1.0:
                finished = True
                break
            if sitting_over(config, now - loop_start, run.step - first_step) or stopping():
                break
            epoch, batch = next(batches)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, run.step, fraction)
            loss = batch_loss(model, batch, head, config.copy_weight)
            optimizer.zero_grad(set_to_none=True)
            loss.total.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            run.advance(epoch, batch.tokens)
            run.smooth = loss.denoise if run.smooth is None else 0.95 * run.smooth + 0.05 * loss.denoise
            if loss.copy is not None:
                run.copy_smooth = (loss.copy if run.copy_smooth is None
                                   else 0.95 * run.copy_smooth + 0.05 * loss.copy)
            if progress:
                progress(min(999, int(1000 * fraction)), 1000)
            if run.step % 25 == 0:
                seconds = spent + time.perf_counter() - loop_start
                point = {"step": run.step, "seconds": round(seconds, 1), "train_loss": round(run.smooth, 4)}
                if run.copy_smooth is not None:
                    point["train_copy_loss"] = round(run.copy_smooth, 4)
                if held_out.examples and time.perf_counter() - last_eval >= config.eval_every_s:
                    point.update(evaluate_loss(model, head, held_out.examples, config.arch, ids,
                                               config.batch_tokens, config.seed))
                    last_eval = time.perf_counter()
                run.curve.append(point)
                say(f"step {run.step} epoch {epoch} loss {run.smooth:.3f}"
                    + (f" copy {run.copy_smooth:.3f}" if run.copy_smooth is not None else "")
                    + f" lr {optimizer.param_groups[0]['lr']:.2e} {run.tokens_seen / seconds:,.0f} tok/s"
                    + f" {seconds:.0f}s" + "".join(f" {k} {v}" for k, v in point.items() if k.startswith("eval")))
            if config.checkpoint_minutes and time.perf_counter() - last_save >= config.checkpoint_minutes * 60:
                checkpoint()
                last_save = time.perf_counter()
    del batches  # stops the workers that build batches ahead
    if not finished:
        checkpoint()
        say(f"sitting ended after {run.step - first_step} steps ({run.step} in all): checkpoint in "
            f"{checkpoint_folder(config.out)}; --resume goes on from it")
        return TrainResult(out=Path(config.out), arch=config.arch, steps=run.step, seconds=run.seconds,
                           tokens_seen=run.tokens_seen, examples=len(train.examples),
                           parameters=sum(p.numel() for p in parameters), checkpoint_bytes=0,
                           loss_curve=run.curve, finished=False, sittings=run.sittings)
    end_sitting()
    step, tokens_seen, curve = run.step, run.tokens_seen, run.curve
    seconds = spent + time.perf_counter() - loop_start
    final = {"step": step, "seconds": round(seconds, 1)}
    if run.smooth is not None:
        final["train_loss"] = round(run.smooth, 4)
    if held_out.examples:
        final.update(evaluate_loss(model, head, held_out.examples, config.arch, ids, config.batch_tokens, config.seed))
    curve.append(final)

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    kept = {k: v for k, v in model.config.wmstudio.items() if k != READ_PROMPT_TOKENS}  # chosen anew for a new model
    model.config.wmstudio = {**kept, "prompt_tokens": config.prompt_tokens}
    if config.arch == MDLM and config.outcome_first > 0:  # its sampler settles the outcome first
        model.config.wmstudio["decide_first"] = OUTCOME_KEY
    if train.shape_canvases or model.config.wmstudio.get("writes_shape"):  # a tool without a schema gets a sketch
        model.config.wmstudio["writes_shape"] = True
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    if head is not None:
        head.save(out)
    outcome = None
    if config.arch == MDLM and config.outcome_head:
        say("fitting the outcome head")
        outcome = fit_outcome_head(train_rows, out, seed=config.seed, corpus=str(config.corpus))
    if outcome is None:  # a head left from an earlier run in this folder would answer for another model
        for name in (OUTCOME_HEAD_FILE, OUTCOME_CONFIG_FILE, TEMPLATES_FILE):
            (out / name).unlink(missing_ok=True)
    else:
        say(f"outcome head: {outcome['rows']} rows, {outcome['tools']} tools, training accuracy "
            f"{outcome['train_accuracy']}, {outcome['seconds']} s")
    schemas = write_trained_schemas(train_rows, out, corpus=str(config.corpus)) if config.arch == MDLM else None
    if schemas is None:  # schemas left from an earlier run would lay out tools this model never trained on
        (out / SCHEMAS_FILE).unlink(missing_ok=True)
    result = TrainResult(
        out=out,
        arch=config.arch,
        steps=step,
        seconds=round(spent + time.perf_counter() - started, 1),  # earlier sittings' training, then this one's
        tokens_seen=tokens_seen,
        examples=len(train.examples),
        parameters=sum(p.numel() for p in parameters),
        checkpoint_bytes=_directory_bytes(out),
        loss_curve=curve,
        sittings=run.sittings,
    )
    summary = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
               "corpus": corpus_stats(config.corpus), "device": str(device), **result.to_json(),
               "lineage": base_lineage(config.base), "outcome_head": outcome,
               "trained_schemas": schemas}
    (out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_model_card(out)
    remove_checkpoint(out)
    say(f"saved {out} ({result.parameters:,} parameters, {result.checkpoint_bytes:,} bytes) after {step} steps")
    return result
