"""The model card of a trained world model: intended use, limitations, data, objective, size, every training stage,
measured quality.

Written from `training.json` (and `quality.json` / `quality-oracle.json` once evaluated) beside the weights, so a
shipped model always says what it is, what it is for and how good it is. No absolute paths: folders by name."""

from __future__ import annotations

import json
from pathlib import Path

from wmstudio.model.heads.copy_head import FEATURES
from wmstudio.train.world_model.examples import SKELETON_COPIES
from wmstudio.train.world_model.pair import PAIR_FILE
from wmstudio.world.corpus.rows import SPLITS


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
    for split in SPLITS:
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
    quality, oracle = (json.loads((folder / name).read_text(encoding="utf-8")) if (folder / name).exists() else None
                       for name in ("quality.json", "quality-oracle.json"))
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
        + (f"; outcome first: {config['outcome_first']:.0%} of skeleton canvases wholly masked with the outcome "
           "(`status`) weighted as much as the other values together, so the model decides the outcome from the "
           "prompt and its sampler settles it before any other value" if config.get("outcome_first") else "")
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
        _intro(arch, folder),
        f"It loads with `AutoModelForCausalLM.from_pretrained(\"{name}\")` from its folder (no custom code); "
        "`config.json` carries a `wmstudio` marker with its kind and special token ids.",
        *_use_lines(arch, ((training.get("corpus") or {}).get("synthetic_worlds") or {}).get("train", 0)),
        "",
        "## Data",
        f"- corpus: `{Path(str(config['corpus'])).name}` ({corpus_summary(training.get('corpus', {}))}), simulated "
        "worlds of `wmstudio corpus`; training split only, the eval split for the loss curve, the test split for "
        "quality",
        _grounding_line(training),
        f"- {training['examples']:,} training examples; prompts rendered with `render_prompt` and encoded with "
        "`encode_prompt` exactly as at generation time",
        f"- tokenizer: byte-level BPE trained on the corpus, vocabulary {config['vocab_size']:,} (+ specials)",
        "",
        "## Objective",
        objective + ".",
        *_copy_head_lines(folder, config, arch, evals),
        *_outcome_head_lines(folder, arch),
        *_message_template_lines(folder),
        *_trained_schema_lines(folder),
        "",
        "## Size",
        f"- {training['parameters']:,} parameters; {config['layers']} layers, width {config['hidden']}, "
        f"{config['heads']} heads, FFN {config['ffn']}, context {config['max_positions']}, tied embeddings",
        f"- weights: {training['checkpoint_bytes']:,} bytes (fp32 safetensors)",
        "",
        "## Training",
        *_lineage_lines(training.get("lineage") or []),
        f"- stage {len(training.get('lineage') or []) + 1} (this run)"
        f"{': ' + config['note'] if config.get('note') else ''}: {training['steps']:,} optimizer steps, "
        f"{training['tokens_seen']:,} tokens, {training['seconds'] / 60:.1f} "
        f"minutes in all on `{training.get('device', 'cpu')}` (seed {config['seed']}, AdamW, peak lr "
        f"{config['learning_rate']}, cosine decay, ~{config['batch_tokens']:,} tokens per batch)",
        *_sitting_lines(training.get("sittings") or []),
    ]
    if trains:
        lines.append(f"- train loss (smoothed): {trains[0]['train_loss']:.3f} at step {trains[0]['step']} -> "
                     f"{min(p['train_loss'] for p in trains):.3f} best -> {trains[-1]['train_loss']:.3f} at the end")
    if evals:
        lines.append(f"- held-out loss: {evals[0]['eval_loss']:.3f} before training -> {evals[-1]['eval_loss']:.3f} "
                     f"after ({len(evals)} evaluations; full curve in `training.json`)")
    lines += _pair_lines(folder)
    lines += ["", "## Measured quality", ""]
    lines += _quality_lines(quality) if quality else [
        "Measured beside its twin by `benchmarks/pair_bench.py` (field accuracy by kind with and without the helpers, "
        "Patronus matches, diversity, speed) and `benchmarks/pinned_error_coherence.py`: docs/results.md, *The pair*."
        if (folder / PAIR_FILE).exists() else "Not evaluated yet: run `wmstudio eval-wm`."]
    if oracle:
        lines += ["", "### With grounding `oracle` (the simulator's state in every prompt: not what a user gets)", ""]
        lines += _quality_lines(oracle)
    (folder / "README.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "README.md"


def _lineage_lines(lineage: list[dict]) -> list[str]:
    """A line per earlier stage of a model continued with `train-wm --base`, oldest first."""
    lines = []
    for number, stage in enumerate(lineage, 1):
        loss = stage.get("eval_loss")
        held_out = f", held-out loss {loss[0]:.2f} -> {loss[1]:.2f}" if loss else ""
        origin = "from scratch" if not stage.get("base") else "continued from the stage before"
        shares = f", outcome-first share {stage['outcome_first']}" if stage.get("outcome_first") else ""
        shares += f", sketch share {stage['shape_share']}" if stage.get("shape_share") else ""
        note = f": {stage['note']}" if stage.get("note") else ""
        corpus = f", corpus `{stage['corpus']}`" if stage.get("corpus") else ""
        lines.append(f"- stage {number}, {origin}{note} ({stage.get('steps') or 0:,} steps, "
                     f"{(stage.get('tokens_seen') or 0) / 1e6:.1f}M tokens, {stage.get('minutes')} minutes, seed "
                     f"{stage.get('seed')}, peak lr {stage.get('learning_rate')}{shares}{corpus}){held_out}")
    return lines


def _intro(arch: str, folder: Path) -> str:
    """The card's first sentence: what this model is for."""
    if (folder / PAIR_FILE).exists():
        twin = "wm-ar-pair" if arch == "mdlm" else "wm-mdlm-pair"
        return (f"The {'masked diffusion' if arch == 'mdlm' else 'autoregressive'} half of the pair ([wm-pair]): "
                f"trained from scratch beside `{twin}` on the same rows, tokenizer, shape and steps (`wmstudio model "
                "train-pair`), one CPU thread each, for the paper's comparison of the two on equal terms"
                + (" (the studio's default is `wm-mdlm-small`)." if arch == "mdlm" else
                   "; the studio's *Compare with AR baseline* runs it."))
    return ("The embedded default world model of wmstudio: a small transformers-native Llama used as a prefix-causal "
            "masked denoiser that fills a tool response canvas around pinned anchors." if arch == "mdlm" else
            "The autoregressive baseline of wmstudio: the same size as the MDLM, left-to-right decoding (its rows "
            "below).")


def _pair_lines(folder: Path) -> list[str]:
    """What each model of the pair got (its `pair.json`, written by `wmstudio model train-pair`)."""
    if not (folder / PAIR_FILE).exists():
        return []
    pair = json.loads((folder / PAIR_FILE).read_text(encoding="utf-8"))
    lines = ["", "## The pair", "", "| | steps | tokens | training loop, CPU minutes | parameters | tokenizer |",
             "|---|---|---|---|---|---|"]
    for arch, model in pair["models"].items():
        lines.append(f"| {model['folder']} | {model['steps']:,} | {model['tokens_seen']:,} | "
                     f"{model['train_cpu_seconds'] / 60:.1f} | {model['parameters']:,} | {model['tokenizer_sha256']} |")
    lines += ["", f"The same tokenizer: {pair['same_tokenizer']}; the same steps: {pair['same_steps']}; parameters "
                  f"{pair['parameter_gap']:.1%} apart. The comparison is in docs/results.md (`python "
                  "benchmarks/pair_bench.py`)."]
    return lines


def _grounding_line(training: dict) -> str:
    """What the rows' prompts held beyond the five parts, as the corpus drew it."""
    corpus = training.get("corpus") or {}
    if corpus.get("oracle_share") == 0:
        return ("- grounding: `none` on every row (the initial state and the history only; a listing's records found "
                "in the initial state by the call's arguments): what it gets wherever it stands in for an environment")
    if _has_grounding(training):
        return ("- grounding (what a row's prompt holds beyond the five parts): `none` on about 60% of the rows (the "
                "initial state and the history only; a listing's records found in the initial state by the call's "
                "arguments), `oracle` on about 40% (the simulator's state after the earlier turns and its retrieval, "
                "labelled as the oracle's); rows record theirs in `meta.grounding`")
    return ("- grounding: every row's prompt held the simulator's replayed state and retrieval (before grounding "
            "`none` existed)")


def _has_grounding(training: dict) -> bool:
    """Whether the run's corpus drew grounding per row (`none` / `oracle`): every run since grounding existed."""
    return bool((training.get("corpus") or {}).get("oracle_grounding")) or bool(training.get("grounding_mix"))


def _use_lines(arch: str, synthetic: int = 0) -> list[str]:
    """Intended use and limitations, what every card of ours must say (`synthetic`: generated worlds trained on)."""
    worlds = "the five demo worlds" + (f" and {synthetic} generated ones (`wmstudio worlds synth`)" if synthetic else "")
    if arch != "mdlm":
        return ["", "## Intended use", "The baseline the masked diffusion model is measured against in `wmstudio "
                "eval-wm` and the studio's *Compare with AR baseline*: of the same size (its Data section names its "
                "rows), it writes the response left to right. Pinned fields are steering directives in its prompt "
                "and are written where it opens their keys, as are the helpers' values (the outcome head's status "
                "and code, the copied record, the call's ids, rule-fixed fields) where its folder has the heads "
                "(model/serving/ar_pins.py); a field it writes before a pin did not see the pin."]
    return [
        "", "## Intended use",
        "- A stand-in environment for LLM agents on small tool sets: the Simulate tab, `wmstudio generate`, "
        "`wmstudio serve-wm`, rollouts and GRPO's `world-model` environment. By default (grounding `none`) it is "
        "given the five parts only (initial state, task and history as it answered them, tool schemas, domain "
        "rules, steering) and tracks the state itself; grounding `oracle` (a simulator's state in the prompt) is "
        "for measurement and must be asked for by name.",
        "- Steered rollouts: pin fields anywhere (`status=\"error\"`) and let it fill the rest; `repair` makes the "
        "rest agree with the world's rules.",
        "", "## Limitations",
        f"- A 1.6M-parameter model trained for a few CPU hours on {worlds}: it copies values through "
        "its copy head (the denoiser alone copies little: see the `no copy head` column below) and chooses status "
        "and error code with a linear outcome head over named facts; free text (messages) is often garbled.",
        "- Listings rely on a hand-built retrieval over the initial state (the prompt's computed query state): a "
        "record created or changed by an earlier turn is not in it, and a page token no earlier turn gave cannot "
        "be followed.",
        "- On tools it never trained on (your own world) it does much less than on the demo worlds: measure it "
        "there with `benchmarks/zero_shot_tau.py` or `wmstudio eval-wm` on a corpus of your world before you "
        "trust it.",
    ]


def _copy_head_lines(folder: Path, config: dict, arch: str, evals: list[dict]) -> list[str]:
    """A line on the copy (pointer) head when the MDLM was trained with one, with its held-out accuracy and whether
    it chooses among computed values too."""
    if arch != "mdlm" or not config.get("copy_head"):
        return []
    scored = [p for p in evals if "eval_copy_accuracy" in p]
    accuracy = (f"; on held-out masked value spans its choice (a leaf, or generate) is right "
                f"{scored[-1]['eval_copy_accuracy']:.1%} of the time" if scored else "")
    head = folder / "copy_head.json"
    computed = ""
    if head.exists() and json.loads(head.read_text(encoding="utf-8")).get("features") == FEATURES:
        computed = (" and values computed from them (a shown number times a count the call asks for, a text's byte "
                    "length, a list's item count, a relative path joined to the working folder, a shown time an hour, "
                    "a day or a week later)")
    return ["", f"Beside it a copy (pointer) head, `copy_head.safetensors`, trained jointly (loss weight "
                f"{config.get('copy_weight', 1.0)}): for each masked value span it scores the prompt's JSON leaves "
                f"that fit the span{computed} against a generate gate{accuracy}."]


def _fitted_beside(folder: Path, name: str) -> dict | None:
    """What the fit recorded in the JSON file `name` beside the weights ({} when it says nothing; None: no file)."""
    path = folder / name
    if not path.exists():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("fitted") or {}


def _outcome_head_lines(folder: Path, arch: str = "mdlm") -> list[str]:
    """A line on the outcome head when one is saved beside the weights, with what its fit saw."""
    fitted = _fitted_beside(folder, "outcome_head.json")
    if fitted is None:
        return []
    source = f" of `{Path(str(fitted['corpus'])).name}`" if fitted.get("corpus") else ""
    seen = (f", fitted on {fitted['rows']:,} training rows{source} ({fitted['tools']} tools, {fitted['outcomes']} "
            f"status/error-code pairs; training accuracy {fitted['train_accuracy']:.1%}, {fitted['seconds']:.0f} s)"
            if fitted.get("rows") else "")
    return ["", "Beside it an outcome head, `outcome_head.safetensors`: a hashed linear scorer over named facts of "
                "the call and the state (lookups, the named record's flags, dates' ages, number comparisons, "
                f"argument checks, earlier turns on the same ids){seen}. "
                + ("Generation writes its choice of `status` and `error` into their own canvas slots before "
                   "denoising, and the model fills the rest under it (sampler setting `outcome_head`; the canvas "
                   "decides when it is off)." if arch == "mdlm" else
                   "Generation writes its choice of `status` and `error` where the model opens those keys, or "
                   "before it closes the answer without them (sampler setting `outcome_head`; the model decides "
                   "when it is off).")]


def _message_template_lines(folder: Path) -> list[str]:
    """A line on the messages the outcome head writes, when their templates are saved beside the weights."""
    fitted = _fitted_beside(folder, "message_templates.json")
    if fitted is None:
        return []
    source = f" of `{Path(str(fitted['corpus'])).name}`" if fitted.get("corpus") else ""
    return ["", f"Beside it `message_templates.json`: {fitted.get('templates', 0)} message templates learned from "
                f"{fitted.get('rows', 0):,} training answers{source}, per tool and outcome (the values of the call and "
                "of the record it names made slots). With its outcome the head writes that message, filled from the "
                "call and the state the prompt shows (a tool or outcome with none: the model writes it; off with "
                "the outcome head). Without them the model's messages named ids that exist nowhere."]


def _trained_schema_lines(folder: Path) -> list[str]:
    """A line on the response schemas kept beside the weights, when there are some."""
    fitted = _fitted_beside(folder, "trained_schemas.json")
    if fitted is None:
        return []
    count = f" of its {fitted['tools']} training tools" if fitted.get("tools") else ""
    return ["", f"Beside it `trained_schemas.json`: the response schemas{count} as training laid them out, per world "
                "and tool with the tool's argument names. A world that leaves one of those tools without a response "
                "schema gets that skeleton back (a lookup, not something the denoiser learned); another world's "
                "tool, or one whose arguments changed, gets a free canvas."]


def _sitting_lines(sittings: list[dict]) -> list[str]:
    """A run resumed across sittings says how many it took and the CPU time they used (`model train --resume`)."""
    if len(sittings) < 2:
        return []
    cpu = sum(float(s.get("cpu_seconds") or 0) for s in sittings)
    loop = sum(float(s.get("seconds") or 0) for s in sittings)
    return [f"  - trained in {len(sittings)} sittings (`--resume`): {loop / 3600:.1f} hours of training loop, "
            f"{cpu / 3600:.1f} CPU hours (all threads)"]


def corpus_summary(stats: dict) -> str:
    rows, seed, splits = stats.get("rows"), stats.get("seed"), stats.get("splits")
    if isinstance(rows, int) and seed is not None:
        synthetic = stats.get("synthetic_worlds")
        worlds = sum(synthetic.values()) if isinstance(synthetic, dict) else 0
        drawn = f" --synthetic {worlds}" + (f" --synthetic-seed {stats['synthetic_seed']}"
                                              if stats.get("synthetic_seed") is not None else "")
        made = f"made with `wmstudio corpus --rows {rows} --seed {seed}" + (f"{drawn}`" if worlds else "`")
        if worlds:  # whole worlds held out: the test split's are never trained on
            made += f" ({', '.join(f'{k} {v}' for k, v in synthetic.items())} synthetic worlds"
            themes = stats.get("synthetic_themes")
            made += (f" of {', '.join(f'{k} {v}' for k, v in themes.items())} themes, none shared between splits)"
                     if isinstance(themes, dict) else ")")
        return made + (f": {', '.join(f'{k} {v:,}' for k, v in splits.items())} rows" if isinstance(splits, dict) else "")
    if isinstance(rows, dict):
        return ", ".join(f"{split} {count:,}" for split, count in rows.items()) + " rows"
    return "stats unknown"


def _quality_lines(quality: dict) -> list[str]:
    """The evaluation's table as markdown lines (written by `wmstudio.train.world_model.evaluation`)."""
    lines = [quality.get("summary", "")] if quality.get("summary") else []
    table = quality.get("table") or []
    if table:
        columns = list(dict.fromkeys(key for row in table for key in row))  # measure first, then each answerer
        lines += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        lines += ["| " + " | ".join(str(row.get(column, "")) for column in columns) + " |" for row in table]
    return lines
