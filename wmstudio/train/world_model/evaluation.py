"""How good a world model is, measured honestly on held-out rows of the simulated worlds (`wmstudio eval-wm`).

The headline is field accuracy against the simulator's truth, by where each value comes from (field_kinds.py: the
call, the initial state or the earlier turns, i.e. the five parts a prompt holds with grounding `none`); rule
consistency only beside it. Every prompt is rendered under one grounding (world/grounding.py; `none` by default:
no simulator's state or retrieval in the prompt). Columns: `raw` (the model on its own: greedy, the schema's
grammar, its copy and outcome heads), `no_outcome_head`, `no_copy_head` (the denoiser alone writes every value),
`steered` (plus rule-guided repair), `ar` (the autoregressive baseline of the same size; its card names its rows), and the cheap
answers of train/world_model/baselines.py on the same rows (constants, `echo`, `rule_status`, `echo_plus`, `nearest_train`). Also `flip`
(status="error" pinned on calls the simulator answers ok), `free` (no response schema), `prompt_use` (content
NLL with a row's own prompt and another's, with and without the copy head) and diversity over K samples."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wmstudio.metrics.diversity import distinct_n, self_bleu
from wmstudio.model.denoising.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.world_model.baselines import BASELINE_NAMES, TrainingAnswers, baseline_response, with_status
from wmstudio.train.world_model.eval_report import RATE_NAMES, EvalReport, write_quality  # noqa: F401 (write_quality: the CLI's)
from wmstudio.train.world_model.examples import FREE_LENGTHS, read_corpus_split, request_from_meta
from wmstudio.train.world_model.field_kinds import FieldScores, enum_options, field_leaves, parse, prompt_values
from wmstudio.train.world_model.model_card import corpus_stats
from wmstudio.world.checks.error_codes import contradicted
from wmstudio.world.checks.report import CheckReport
from wmstudio.world.checks.text_quality import response_repeats
from wmstudio.world.grounding import NONE, ORACLE, Grounding, parse_grounding
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import current_state
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor

ERROR_STATUS = "error"


@dataclass
class EvalCase:
    """One held-out row: the world it came from, the call, the earlier steps and the true response."""

    world: WorldSpec
    call: Call
    history: list[HistoryStep]
    truth: str
    where: str

    @property
    def schema(self) -> dict | None:
        try:
            return self.world.tool(self.call.name).response
        except KeyError:
            return None


@dataclass
class Rates:
    """Check outcomes and field accuracy over a set of responses."""

    total: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RATE_NAMES, 0))
    fields: FieldScores = field(default_factory=FieldScores)

    def add(self, report: CheckReport, response: str, case: EvalCase) -> None:
        truth, value = parse(case.truth), parse(response)
        self.total += 1
        rule_ok = report.json_valid and not report.rule_violations
        same = isinstance(value, dict) and isinstance(truth, dict) and value.get("status") == truth.get("status")
        for name, hit in (("json_valid", report.json_valid), ("schema_valid", report.json_valid and not
                                                                 report.schema_errors),
                          ("rule_consistent", rule_ok), ("same_status", same), ("rule_and_status", rule_ok and same),
                          ("code_contradicted", contradicted(case.world, case.call, value, case.history) is not None),
                          ("message_strays", bool(report.message_strays)),
                          ("text_repeats", response_repeats(value) > 0)):
            self.counts[name] += int(bool(hit))
        shown = prompt_values(case.world.initial_state, [s.to_json() for s in case.history])  # the five parts
        self.fields.add(truth, value, prompt_values(case.call.arguments), shown, enum_options(case.schema))

    def to_json(self) -> dict[str, Any]:
        figures: dict[str, Any] = {name: round(self.counts[name] / self.total, 4) if self.total else None
                                   for name in RATE_NAMES}
        figures["nonempty_recall"] = self.fields.recall()
        figures["field_accuracy"] = self.fields.accuracy()
        figures["cases"] = self.total
        return figures


WORLD_SETS = ("all", "demo", "heldout-synthetic")


def load_cases(corpus: Path, split: str = "test", rows: int = 200, seed: int = 0, worlds: str = "all"
               ) -> list[EvalCase]:
    """Held-out rows that carry `meta` (simulated worlds), a seeded sample of `rows` of them; `worlds` keeps only
    the demo worlds' rows or only the synthetic worlds' (in a corpus made with `--synthetic`, the test split's
    synthetic worlds are whole worlds never trained on)."""
    if worlds not in WORLD_SETS:
        raise InvalidInput(Problem("worlds", f"{worlds!r} is not a set of worlds: use {', '.join(WORLD_SETS)}"))
    corpus_rows = [row for row in read_corpus_split(corpus, split) if row.meta and (
        worlds == "all" or (worlds == "demo") != str(row.meta.get("world", "")).startswith("synthetic:"))]
    if not corpus_rows:
        raise InvalidInput(Problem(f"{corpus}/{split}.jsonl", f"no rows with `meta` of the {worlds} worlds: evaluate "
                                                             "on a `wmstudio corpus` folder (--synthetic N for "
                                                             "synthetic worlds)"))
    random.Random(seed).shuffle(corpus_rows)
    cases = []
    for row in corpus_rows[:rows]:
        request = request_from_meta(row.meta, row.where)
        cases.append(EvalCase(request.world, request.call, request.history, row.response_text, row.where))
    return cases


def flip_anchor(case: EvalCase) -> Anchor | None:
    """`status="error"` when the simulator answered ok and the tool's schema has an error status."""
    schema = case.schema or {}
    status = (schema.get("properties") or {}).get("status") or {}
    truth = parse(case.truth)
    if ERROR_STATUS not in (status.get("enum") or []) or not isinstance(truth, dict):
        return None
    return Anchor("status", ERROR_STATUS) if truth.get("status") == "ok" else None


def free_length_for(case: EvalCase, tokenizer) -> int:
    """A free canvas as long as the tool's skeleton (known before sampling), in a standard size."""
    from wmstudio.model.canvas.canvas import build_canvas

    try:
        need = len(build_canvas(tokenizer, case.schema)) if case.schema else FREE_LENGTHS[1]
    except InvalidInput:
        need = FREE_LENGTHS[1]
    return next((size for size in FREE_LENGTHS if size >= need), FREE_LENGTHS[-1])


def training_answers(corpus: Path, grounding: Grounding) -> TrainingAnswers:
    """What the baselines know of the corpus's training rows, each row's state read as its prompt would show it
    under `grounding`."""
    answers = TrainingAnswers()
    for row in read_corpus_split(corpus, "train"):
        if row.meta:
            request = request_from_meta(row.meta, row.where)
            answers.add(request.world, request.call, shown_state(request.world, request.history, grounding),
                        row.response_text)
    return answers


def shown_state(world: WorldSpec, history: list[HistoryStep], grounding: Grounding) -> Any:
    """The state a prompt shows under `grounding`: the initial one, or the simulator's after `history` (oracle)."""
    now = current_state(world, history) if grounding == ORACLE and history else None
    return world.initial_state if now is None else now


def evaluate_world_model(mdlm: str | Path, ar: str | Path | None, corpus: Path, rows: int = 200,
                         diversity_calls: int = 8, samples: int = 8, split: str = "test", seed: int = 0,
                         grounding: Grounding = NONE, worlds: str = "all",
                         progress: Callable[[int, int], None] | None = None) -> EvalReport:
    """Evaluate the MDLM at `mdlm` (and the AR baseline at `ar`) on `rows` held-out rows of `corpus`, with
    `generate` and `check_step` exactly as the studio runs them, every prompt rendered under `grounding`, beside
    the baselines (train/world_model/baselines.py) on the same rows."""
    from wmstudio.model.generation.generation import generate
    from wmstudio.model.serving.backends import load_backend
    from wmstudio.train.world_model.prompt_use import prompt_use

    grounding = parse_grounding(grounding)
    started = time.perf_counter()
    cases = load_cases(corpus, split, rows, seed, worlds)
    answers = training_answers(corpus, grounding)
    model = load_backend(str(mdlm))
    baseline = load_backend(str(ar)) if ar else None
    if getattr(model, "kind", None) == "ar":
        raise InvalidInput(Problem("mdlm", f"{mdlm} is an autoregressive model: give the masked diffusion one"))
    has_outcome = getattr(model, "outcome_head", None) is not None
    has_copy = getattr(model, "copy_head", None) is not None
    columns = ["raw", *(["no_outcome_head"] if has_outcome else []), *(["no_copy_head"] if has_copy else []),
               "steered", *(["ar"] if baseline is not None else []), *BASELINE_NAMES]
    rates = {name: Rates() for name in columns}
    flips = {name: Rates() for name in columns}
    settings = {"raw": SamplerSettings(grounding=grounding),
                "no_outcome_head": SamplerSettings(grounding=grounding, outcome_head=False),
                "no_copy_head": SamplerSettings(grounding=grounding, copy_head=False),
                "steered": SamplerSettings(grounding=grounding, repair=True),
                "ar": SamplerSettings(grounding=grounding)}
    free = {"cases": 0, "json_valid": 0, "schema_valid": 0, "same_keys": 0, "from_history": 0, "from_training": 0,
            "from_sketch": 0, "canvas_json_valid": 0, "canvas_same_keys": 0}
    report = EvalReport()
    total = len(cases) + min(diversity_calls, len(cases))

    def run(name: str, case: EvalCase, anchors=(), into: dict[str, Rates] = rates) -> None:
        backend = baseline if name == "ar" else model
        try:
            sample = generate(backend, case.world, case.call, anchors, case.history, settings[name]).samples[0]
        except InvalidInput as err:
            report.errors.append(f"{case.where} ({name}): {err}")
            return
        into[name].add(sample.checks, sample.response, case)

    for i, case in enumerate(cases):
        score_baselines(case, answers, grounding, rates, flips)
        anchor = flip_anchor(case)
        for name in columns:
            if name in BASELINE_NAMES:
                continue
            run(name, case)
            if anchor is not None and name in ("raw", "steered", "ar"):
                run(name, case, [anchor], flips)
        _score_free(model, case, free, report, grounding)
        if progress:
            progress(i + 1, total)
    diversity = {}
    for name, backend in (("mdlm", model), ("ar", baseline)):
        if backend is not None and diversity_calls:
            diversity[name] = sample_diversity(backend, cases[:diversity_calls], samples, seed, report, grounding)
    if progress:
        progress(total, total)
    report.settings = {"mdlm": str(mdlm), "ar": str(ar) if ar else None, "corpus": str(corpus), "split": split,
                       "rows": len(cases), "seed": seed, "samples": samples, "grounding": grounding, "worlds": worlds,
                       "corpus_seed": _corpus_seed(corpus),
                       "diversity_calls": min(diversity_calls, len(cases))}
    report.figures = {
        "rows": len(cases),
        "model": str(mdlm),
        "grounding": grounding,
        "raw": rates["raw"].to_json(),
        "no_outcome_head": rates["no_outcome_head"].to_json() if has_outcome else None,
        "no_copy_head": rates["no_copy_head"].to_json() if has_copy else None,
        "steered": rates["steered"].to_json(),
        "ar": rates["ar"].to_json() if baseline is not None else None,
        "flip": {name: flips[name].to_json() if name in flips else None
                 for name in ("raw", "steered", "ar", *BASELINE_NAMES)},
        "free": {key: (round(value / free["cases"], 4) if free["cases"] else None) if key != "cases" else value
                 for key, value in free.items()},
        "trivial": {name: rates[name].to_json() for name in BASELINE_NAMES},
        "prompt_use": prompt_use(model, cases, grounding),
        "diversity": diversity,
    }
    if baseline is None:
        report.figures["flip"]["ar"] = None
    report.seconds = time.perf_counter() - started
    return report


def score_baselines(case: EvalCase, answers: TrainingAnswers, grounding: Grounding, rates: dict[str, Rates],
                    flips: dict[str, Rates]) -> None:
    """Add each baseline's answer to `case` (from what its prompt shows under `grounding`) to `rates`, and its
    answer with `status="error"` pinned to `flips` when the case is a flip case."""
    from wmstudio.world.checks.report import check_step

    state = shown_state(case.world, case.history, grounding)
    anchor = flip_anchor(case)
    for name in BASELINE_NAMES:
        text = baseline_response(name, case.world, case.call, state, answers, case.history)
        rates[name].add(check_step(case.world, case.call, text, history=case.history), text, case)
        if anchor is not None:  # a baseline honours a pinned status by writing it, its error code its own
            error = next((e for s, e in (answers.outcomes.get(case.call.name) or {}) if s == ERROR_STATUS), "")
            pinned = with_status(text, ERROR_STATUS, error)
            flips[name].add(check_step(case.world, case.call, pinned, [anchor], case.history), pinned, case)


def _score_free(model, case: EvalCase, free: dict[str, int], report: EvalReport, grounding: Grounding = NONE) -> None:
    """No response schema given: the called tool's schema is taken out of the world (and so out of the prompt), so
    JSON validity, the real schema and the simulator's top-level keys are earned. Generation then lays out a
    skeleton of the schema the tool's earlier answers in the history fit (counted in `from_history`), else of the
    one the model was trained with for it (`from_training`, model/network/trained_schemas.py: a lookup), else, for a model
    trained to, of the sketch it writes of the tool's schema (`from_sketch`), else a free canvas. The free canvas
    alone, every time (`canvas_*`), is what the denoiser does with no skeleton to fill."""
    from wmstudio.model.generation.generation import FROM_HISTORY, FROM_SKETCH, FROM_TRAINING, generate
    from wmstudio.world.checks.report import schema_errors_of

    real = next((tool for tool in case.world.tools if tool.name == case.call.name), None)
    world = case.world.without_response_schema(case.call.name)
    settings = SamplerSettings(free_length=free_length_for(case, model.tokenizer), grounding=grounding)
    try:
        generation = generate(model, world, case.call, (), case.history, settings)
    except InvalidInput as err:
        report.errors.append(f"{case.where} (free): {err}")
        return
    sample = generation.samples[0]
    value, truth = parse(sample.response), parse(case.truth)
    free["cases"] += 1
    free["from_history"] += int(generation.schema_from == FROM_HISTORY)
    free["from_training"] += int(generation.schema_from == FROM_TRAINING)
    free["from_sketch"] += int(generation.schema_from == FROM_SKETCH)
    free["json_valid"] += int(sample.checks.json_valid)
    free["schema_valid"] += int(sample.checks.json_valid and real is not None
                                and not schema_errors_of(value, real, "response"))
    free["same_keys"] += int(isinstance(value, dict) and isinstance(truth, dict) and set(value) == set(truth))
    try:
        alone = generate(model, world, case.call, (), case.history, replace(settings, free=True)).samples[0]
    except InvalidInput as err:
        report.errors.append(f"{case.where} (free canvas): {err}")
        return
    written = parse(alone.response)
    free["canvas_json_valid"] += int(alone.checks.json_valid)
    free["canvas_same_keys"] += int(isinstance(written, dict) and isinstance(truth, dict) and set(written) == set(truth))


def sample_diversity(backend, cases: list[EvalCase], samples: int, seed: int, report: EvalReport,
                     grounding: Grounding = NONE, base: SamplerSettings = SamplerSettings()) -> dict[str, float]:
    """Self-BLEU and Distinct-2 over K samples per call, of whole responses and of their values only; `base` the
    other sampler settings (the helpers' switches)."""
    from wmstudio.model.generation.generation import generate

    whole, values = [], []
    for j, case in enumerate(cases):
        settings = replace(base, temperature=1.0, samples=samples, seed=seed + j, grounding=grounding)
        try:
            texts = [s.response for s in generate(backend, case.world, case.call, (), case.history, settings).samples]
        except InvalidInput as err:
            report.errors.append(f"{case.where} (diversity): {err}")
            continue
        only = [" ".join(str(leaf) for _, leaf in field_leaves(parse(t))) if parse(t) is not None else t for t in texts]
        whole.append((self_bleu(texts), distinct_n(texts, 2)))
        values.append((self_bleu(only), distinct_n(only, 2)))
    if not whole:
        return {}
    mean = lambda pairs, i: round(sum(p[i] for p in pairs) / len(pairs), 4)  # noqa: E731
    return {"self_bleu": mean(whole, 0), "distinct_2": mean(whole, 1), "values_self_bleu": mean(values, 0),
            "values_distinct_2": mean(values, 1), "calls": len(whole)}


def _corpus_seed(corpus: Path) -> int | None:
    """The seed `wmstudio corpus` made the rows with (its stats.json), the one a card must name; None if unknown."""
    stats = corpus_stats(corpus)
    seed = stats.get("seed") if isinstance(stats, dict) else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None
