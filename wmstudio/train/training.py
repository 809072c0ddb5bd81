"""Training the embedded world models: the masked-diffusion (MDLM) objective, the AR baseline, one loop.

`train_world_model` reads a corpus folder, trains a tokenizer and a small transformers-native model on
CPU within a time budget (or fine-tunes a `--base` checkpoint on a GPU) and saves a folder that loads
with the Auto classes: config + safetensors + tokenizer + `training.json` + a model card."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from transformers.cache_utils import DynamicCache

from wmstudio.model.architecture import MDLM, model_kind
from wmstudio.model.backends import CanvasCache
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.config import TrainConfig
from wmstudio.train.examples import (
    SKELETON_COPIES,
    Batch,
    CorpusRow,
    SplitBatch,
    build_examples,
    make_batch,
    plan_batches,
    read_corpus_split,
)

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

    def to_json(self) -> dict:
        data = asdict(self)
        data["out"] = str(self.out)
        return data


def batch_loss(model, batch: Batch | SplitBatch) -> torch.Tensor:
    """Weighted cross-entropy at the scored positions; the output head runs on those positions only.

    Skipping the vocabulary projection for prompt and unmasked positions is exact and saves most of
    the head's cost, which on a small model is a large share of the whole step."""
    if isinstance(batch, SplitBatch):
        return split_batch_loss(model, batch)
    device = next(model.parameters()).device
    outputs = model.base_model(
        input_ids=batch.input_ids.to(device),
        position_ids=batch.position_ids.to(device),
        attention_mask=batch.attention_mask.to(device),
        use_cache=False,
    )
    hidden = outputs.last_hidden_state[batch.loss_rows.to(device), batch.loss_cols.to(device)]
    logits = model.get_output_embeddings()(hidden).float()
    losses = F.cross_entropy(logits, batch.targets.to(device), reduction="none")
    return (losses * batch.weights.to(device)).sum()


def split_batch_loss(model, batch: SplitBatch) -> torch.Tensor:
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
    hidden = outputs.last_hidden_state[batch.loss_rows.to(device), batch.loss_cols.to(device)]
    logits = model.get_output_embeddings()(hidden).float()
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
    from wmstudio.model.architecture import model_marker, new_model
    from wmstudio.model.tokenizer import SPECIAL_TOKENS, train_tokenizer

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
def evaluate_loss(model, examples, arch, ids, batch_tokens, seed: int) -> float:
    """Mean objective on held-out examples with fixed noise (same seed, same masks), for the loss curve."""
    model.eval()
    rng = torch.Generator().manual_seed(seed)
    total, count = 0.0, 0
    for indices in plan_batches(examples, arch, batch_tokens, seed):
        batch = make_batch([examples[i] for i in indices], arch, ids, rng, split=uses_split_batches(model, arch))
        total += batch_loss(model, batch).item() * len(indices)
        count += len(indices)
    model.train()
    return total / max(count, 1)


def _directory_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def train_world_model(
    config: TrainConfig,
    progress: Callable[[int, int], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train (or fine-tune) a world model on a corpus folder and save it to `config.out`.

    Stops when `steps` are done or `minutes` are spent, whichever comes first; `progress(done, total)`
    counts per-mille of the run, `log(text)` gets a line per report (loss, tokens/s)."""
    if config.arch not in ARCHITECTURES:
        raise InvalidInput(Problem("arch", f"{config.arch!r} is not known: use mdlm or ar"))
    if config.minutes <= 0 and not config.steps:
        raise InvalidInput(Problem("minutes", "give a positive --minutes or a --steps count"))
    say = log or (lambda text: None)
    torch.manual_seed(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    started = time.perf_counter()

    train_rows = read_corpus_split(config.corpus, "train", config.max_rows)
    eval_rows = read_corpus_split(config.corpus, "eval", config.eval_rows, required=False)
    model, tokenizer = prepare_model_and_tokenizer(config, train_rows)
    device = next(model.parameters()).device
    ids = _special_ids(tokenizer)
    train = build_examples(train_rows, tokenizer, config.arch, config.max_positions, seed=config.seed)
    held_out = build_examples(eval_rows, tokenizer, config.arch, config.max_positions, seed=config.seed + 1)
    if not train.examples:
        raise InvalidInput(Problem(str(config.corpus), "no usable training rows: " + "; ".join(train.skipped[:3])))
    say(f"{len(train.examples)} training examples ({len(train.skipped)} rows skipped), {len(held_out.examples)} "
        f"held out; data ready in {time.perf_counter() - started:.0f}s")

    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.98))
    budget = config.minutes * 60 if config.minutes > 0 else math.inf
    rng = torch.Generator().manual_seed(config.seed)
    curve: list[dict] = []
    step, tokens_seen, epoch, smooth = 0, 0, 0, None
    loop_start = time.perf_counter()
    last_eval = loop_start
    if held_out.examples:
        first = evaluate_loss(model, held_out.examples, config.arch, ids, config.batch_tokens, config.seed)
        curve.append({"step": 0, "seconds": 0.0, "eval_loss": round(first, 4)})
    model.train()
    split = uses_split_batches(model, config.arch)
    done = False
    while not done:
        for indices in plan_batches(train.examples, config.arch, config.batch_tokens, config.seed + epoch):
            elapsed = time.perf_counter() - loop_start
            fraction = max(elapsed / budget, step / config.steps if config.steps else 0.0)
            if fraction >= 1.0:
                done = True
                break
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(config, step, fraction)
            batch = make_batch([train.examples[i] for i in indices], config.arch, ids, rng, split=split)
            loss = batch_loss(model, batch)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            step += 1
            tokens_seen += batch.tokens
            smooth = loss.item() if smooth is None else 0.95 * smooth + 0.05 * loss.item()
            if progress:
                progress(min(999, int(1000 * fraction)), 1000)
            if step % 25 == 0:
                seconds = time.perf_counter() - loop_start
                point = {"step": step, "seconds": round(seconds, 1), "train_loss": round(smooth, 4)}
                if held_out.examples and time.perf_counter() - last_eval >= config.eval_every_s:
                    point["eval_loss"] = round(evaluate_loss(
                        model, held_out.examples, config.arch, ids, config.batch_tokens, config.seed), 4)
                    last_eval = time.perf_counter()
                curve.append(point)
                say(f"step {step} epoch {epoch} loss {smooth:.3f} lr {optimizer.param_groups[0]['lr']:.2e} "
                    f"{tokens_seen / seconds:,.0f} tok/s {seconds:.0f}s"
                    + (f" eval {point['eval_loss']:.3f}" if "eval_loss" in point else ""))
        epoch += 1
    seconds = time.perf_counter() - loop_start
    final = {"step": step, "seconds": round(seconds, 1)}
    if smooth is not None:
        final["train_loss"] = round(smooth, 4)
    if held_out.examples:
        final["eval_loss"] = round(
            evaluate_loss(model, held_out.examples, config.arch, ids, config.batch_tokens, config.seed), 4)
    curve.append(final)

    out = Path(config.out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval()
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    result = TrainResult(
        out=out,
        arch=config.arch,
        steps=step,
        seconds=round(time.perf_counter() - started, 1),
        tokens_seen=tokens_seen,
        examples=len(train.examples),
        parameters=sum(p.numel() for p in model.parameters()),
        checkpoint_bytes=_directory_bytes(out),
        loss_curve=curve,
    )
    summary = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
               "corpus": corpus_stats(config.corpus), "device": str(device), **result.to_json()}
    (out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    write_model_card(out)
    say(f"saved {out} ({result.parameters:,} parameters, {result.checkpoint_bytes:,} bytes) after {step} steps")
    return result


def corpus_stats(corpus: Path) -> dict:
    """The corpus's own stats file when `wmstudio corpus` wrote one, else row counts per split."""
    corpus = Path(corpus)
    for name in ("stats.json", "corpus.json"):
        if (corpus / name).exists():
            try:
                return json.loads((corpus / name).read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                break
    counts = {}
    for split in ("train", "eval", "test"):
        path = corpus / f"{split}.jsonl"
        if path.exists():
            with path.open(encoding="utf-8") as handle:
                counts[split] = sum(1 for line in handle if line.strip())
    return {"rows": counts}


def write_model_card(folder: Path) -> Path:
    """(Re)write `README.md` from `training.json` and, once evaluated, `quality.json` in the model folder.

    The card states the data, the objective, the size, the training time, the loss curve and the
    measured quality, so a shipped model always says what it is and how good it is."""
    folder = Path(folder)
    training = json.loads((folder / "training.json").read_text(encoding="utf-8"))
    quality_path = folder / "quality.json"
    quality = json.loads(quality_path.read_text(encoding="utf-8")) if quality_path.exists() else None
    config = training["config"]
    arch = training["arch"]
    curve = training.get("loss_curve", [])
    evals = [p for p in curve if "eval_loss" in p]
    trains = [p for p in curve if "train_loss" in p]
    objective = (
        "masked diffusion (MDLM): per canvas a mask ratio t ~ U(0,1] over the response positions that may be "
        "masked, cross-entropy on the masked positions weighted by 1/t and normalised by the canvas length; "
        "prefix-causal attention (prompt causal, canvas sees prompt and canvas); per row "
        f"{SKELETON_COPIES} independently noised skeleton-style canvases (keys and punctuation as anchors, values "
        "right-padded to their span budgets, arrays of objects in item slots closed by an end token where the "
        "true array ends) and one free-style canvas (the whole text, right-padded to any standard size that "
        "holds it); the prompt is encoded once and every canvas attends to its keys/values (two-pass loss, "
        "exactly the packed objective)"
        if arch == "mdlm"
        else "autoregressive next-token cross-entropy on the response tokens (and eos) given the prompt"
    )
    name = folder.name
    lines = [
        "---",
        "library_name: transformers",
        "license: apache-2.0",
        "tags: [wmstudio, world-model, " + ("masked-diffusion" if arch == "mdlm" else "autoregressive") + "]",
        "---",
        "",
        f"# {name}",
        "",
        ("The embedded default world model of wmstudio: a small transformers-native Llama used as a prefix-causal "
         "masked denoiser that fills a tool response canvas around pinned anchors."
         if arch == "mdlm" else
         "The autoregressive baseline of wmstudio: the same size, the same rows, left-to-right decoding."),
        f"It loads with `AutoModelForCausalLM.from_pretrained(\"{folder.as_posix()}\")` (no custom code); "
        "`config.json` carries a `wmstudio` marker with its kind and special token ids.",
        "",
        "## Data",
        f"- corpus: `{config['corpus']}` ({_corpus_summary(training.get('corpus', {}))}), simulated worlds of "
        "`wmstudio corpus`; training split only, the eval split for the loss curve, the test split for quality",
        f"- {training['examples']:,} training examples; prompts rendered with `render_prompt` and encoded with "
        "`encode_prompt` exactly as at generation time",
        f"- tokenizer: byte-level BPE trained on the corpus, vocabulary {config['vocab_size']:,} (+ specials)",
        "",
        "## Objective",
        objective + ".",
        "",
        "## Size",
        f"- {training['parameters']:,} parameters; {config['layers']} layers, width {config['hidden']}, "
        f"{config['heads']} heads, FFN {config['ffn']}, context {config['max_positions']}, tied embeddings",
        f"- weights: {training['checkpoint_bytes']:,} bytes (fp32 safetensors)",
        "",
        "## Training",
        f"- {training['steps']:,} optimizer steps, {training['tokens_seen']:,} tokens, {training['seconds'] / 60:.1f} "
        f"minutes in all on `{training.get('device', 'cpu')}` (seed {config['seed']}, AdamW, peak lr "
        f"{config['learning_rate']}, cosine decay, ~{config['batch_tokens']:,} tokens per batch)",
    ]
    if trains:
        lines.append(f"- train loss (smoothed): {trains[0]['train_loss']:.3f} at step {trains[0]['step']} -> "
                     f"{min(p['train_loss'] for p in trains):.3f} best -> {trains[-1]['train_loss']:.3f} at the end")
    if evals:
        lines.append(f"- held-out loss: {evals[0]['eval_loss']:.3f} before training -> {evals[-1]['eval_loss']:.3f} "
                     f"after ({len(evals)} evaluations; full curve in `training.json`)")
    lines += ["", "## Measured quality", ""]
    lines += _quality_lines(quality) if quality else ["Not evaluated yet: run `wmstudio eval-wm`."]
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "README.md"


def _corpus_summary(stats: dict) -> str:
    rows, seed, splits = stats.get("rows"), stats.get("seed"), stats.get("splits")
    if isinstance(rows, int) and seed is not None:
        made = f"made with `wmstudio corpus --rows {rows} --seed {seed}`"
        return made + (f": {', '.join(f'{k} {v:,}' for k, v in splits.items())} rows" if isinstance(splits, dict) else "")
    if isinstance(rows, dict):
        return ", ".join(f"{split} {count:,}" for split, count in rows.items()) + " rows"
    return "stats unknown"


def _quality_lines(quality: dict) -> list[str]:
    """The evaluation's table as markdown lines (written by `wmstudio.train.evaluation`)."""
    lines = [quality.get("summary", "")] if quality.get("summary") else []
    table = quality.get("table") or []
    if table:
        lines += ["", "| measure | value | target |", "|---|---|---|"]
        lines += [f"| {row['measure']} | {row['value']} | {row.get('target', '')} |" for row in table]
    return lines
