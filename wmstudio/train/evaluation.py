"""How good a world model is, measured honestly on held-out rows of the simulated worlds (`wmstudio eval-wm`).

The headline is field accuracy against the simulator's truth, by where each value comes from (field_kinds.py);
rule consistency is reported only beside it, and every figure beside what two constant answers score on the same
rows (every field empty with status "error", and with status "ok"), since a constant can pass a rule. Rows:
`raw` (the model on its own: greedy, the schema's grammar, its copy head), `steered` (plus rule-guided repair),
`ar` (the autoregressive baseline), `flip` (status="error" pinned on calls the simulator answers ok), `free` (no
skeleton), `prompt_use` (does the model read its prompt: content NLL with its own prompt and with another row's
for the same tool), and diversity over K samples at temperature 1."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from wmstudio.metrics.diversity import distinct_n, self_bleu
from wmstudio.model.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.examples import FREE_LENGTHS, read_corpus_split, request_from_meta
from wmstudio.train.field_kinds import FieldScores, enum_options, field_leaves, parse, prompt_values
from wmstudio.world.anchors import Anchor
from wmstudio.world.checks import CheckReport
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt import current_state
from wmstudio.world.sims.base import neutral_value
from wmstudio.world.spec import Call, WorldSpec

ERROR_STATUS = "error"
RATE_NAMES = ("json_valid", "schema_valid", "rule_consistent", "same_status", "rule_and_status")


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
                          ("rule_consistent", rule_ok), ("same_status", same), ("rule_and_status", rule_ok and same)):
            self.counts[name] += int(bool(hit))
        now = current_state(case.world, case.history) if case.history else None
        shown = prompt_values(case.world.initial_state, now, [s.to_json() for s in case.history])
        self.fields.add(truth, value, prompt_values(case.call.arguments), shown, enum_options(case.schema))

    def to_json(self) -> dict[str, Any]:
        figures: dict[str, Any] = {name: round(self.counts[name] / self.total, 4) if self.total else None
                                   for name in RATE_NAMES}
        figures["nonempty_recall"] = self.fields.recall()
        figures["field_accuracy"] = self.fields.accuracy()
        figures["cases"] = self.total
        return figures


@dataclass
class EvalReport:
    """All figures of one evaluation (the `--json` shape), a table to print, the settings, and timing."""

    figures: dict[str, Any] = field(default_factory=dict)
    denoiser: dict[str, Any] | None = None  # raw with the outcome head off, when the model has one (not in --json)
    settings: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return self.figures

    def summary(self) -> str:
        s = self.settings
        return (f"Measured by `wmstudio eval-wm` on {s.get('rows')} held-out rows of the `{s.get('split')}` split of "
                f"`{s.get('corpus')}` ({self.seconds / 60:.1f} min); greedy decoding with the default sampler "
                f"settings (`raw` with the model's outcome head choosing status and error code where it has one; "
                f"`denoiser alone` the same with the head off); diversity over {s.get('samples')} samples at temperature 1 for "
                f"{s.get('diversity_calls')} calls. Trivial baselines are constant responses on the same rows.")

    def table(self) -> list[dict[str, str]]:
        """Rows `measure | raw | (denoiser alone) | steered | AR | always error | always ok` for the card and the
        terminal; the denoiser-alone column only for a model with an outcome head."""
        f = self.figures
        columns = {"raw": f.get("raw"), "denoiser alone": self.denoiser, "steered": f.get("steered"),
                   "AR": f.get("ar"), "always error": f["trivial"]["neutral_error"],
                   "always ok": f["trivial"]["neutral_ok"]}
        if self.denoiser is None:
            del columns["denoiser alone"]
        rows: list[dict[str, str]] = []

        def row(measure: str, **cells: str) -> None:
            rows.append({"measure": measure, **{name: cells.get(name.replace(" ", "_"), "") for name in columns}})

        def rates(measure: str, read: Callable[[dict], float | None]) -> None:
            row(measure, **{name.replace(" ", "_"): _pct(read(c)) if c else "" for name, c in columns.items()})

        for name in (*RATE_NAMES, "nonempty_recall"):
            rates(name, lambda c, name=name: c.get(name))
        for kind in FieldScores().right:
            rates(f"field: {kind}", lambda c, kind=kind: c["field_accuracy"][kind])
        flip = f["flip"]
        row(f"flip (status=error pinned, n={flip['raw']['cases'] if flip['raw'] else 0}): rule_consistent",
            **{name: _pct(flip[key]["rule_consistent"]) if flip.get(key) else ""
               for name, key in (("raw", "raw"), ("steered", "steered"), ("AR", "ar"))})
        free = f["free"]
        history = (f" (a skeleton from the tool's earlier answers on {_pct(free['from_history'])} of rows"
                   + (f", from the schema it was trained with on {_pct(free['from_training'])}"
                      if free.get("from_training") else "")
                   + (f", from the model's own sketch of its schema on {_pct(free['from_sketch'])}"
                      if free.get("from_sketch") else "") + ")"
                   if free.get("from_history") is not None else "")
        row(f"no response schema given{history}: json_valid / schema_valid / same_keys",
            raw=f"{_pct(free['json_valid'])} / {_pct(free['schema_valid'])} / {_pct(free['same_keys'])}")
        if free.get("canvas_same_keys") is not None:
            row("no response schema, the free canvas alone (no skeleton): json_valid / same_keys",
                raw=f"{_pct(free['canvas_json_valid'])} / {_pct(free['canvas_same_keys'])}")
        use = f["prompt_use"]
        if use.get("own_nll") is not None:
            row("prompt_use: content NLL own / swapped prompt", raw=f"{use['own_nll']:.3f} / {use['swapped_nll']:.3f}")
        for name, values in (f.get("diversity") or {}).items():
            row(f"{name} Self-BLEU / Distinct-2 (values only)",
                raw=f"{values['self_bleu']:.3f} / {values['distinct_2']:.3f} "
                    f"({values['values_self_bleu']:.3f} / {values['values_distinct_2']:.3f})")
        return rows

    def render(self) -> str:
        table = self.table()
        widths = {key: max(len(key), *(len(row[key]) for row in table)) for key in table[0]}
        lines = ["  ".join(key.ljust(widths[key]) for key in widths)]
        lines += ["  ".join(row[key].ljust(widths[key]) for key in widths) for row in table]
        return "\n".join(lines)


def load_cases(corpus: Path, split: str = "test", rows: int = 200, seed: int = 0) -> list[EvalCase]:
    """Held-out rows that carry `meta` (simulated worlds), a seeded sample of `rows` of them."""
    corpus_rows = [row for row in read_corpus_split(corpus, split) if row.meta]
    if not corpus_rows:
        raise InvalidInput(Problem(f"{corpus}/{split}.jsonl", "no rows with `meta`: evaluate on a `wmstudio corpus` folder"))
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


def trivial_response(case: EvalCase, status: str) -> str:
    """A constant answer: every field of the tool's response empty (0, "", false, []), with `status`."""
    value = neutral_value(case.schema or {}) if case.schema else {}
    if isinstance(value, dict):
        value["status"] = status
    return json.dumps(value, separators=(",", ":"))


def free_length_for(case: EvalCase, tokenizer) -> int:
    """A free canvas as long as the tool's skeleton (known before sampling), in a standard size."""
    from wmstudio.model.canvas import build_canvas

    try:
        need = len(build_canvas(tokenizer, case.schema)) if case.schema else FREE_LENGTHS[1]
    except InvalidInput:
        need = FREE_LENGTHS[1]
    return next((size for size in FREE_LENGTHS if size >= need), FREE_LENGTHS[-1])


def evaluate_world_model(mdlm: str | Path, ar: str | Path | None, corpus: Path, rows: int = 200,
                         diversity_calls: int = 8, samples: int = 8, split: str = "test", seed: int = 0,
                         progress: Callable[[int, int], None] | None = None) -> EvalReport:
    """Evaluate the MDLM at `mdlm` (and the AR baseline at `ar`) on `rows` held-out rows of `corpus`, with
    `generate` and `check_step` exactly as the studio runs them."""
    from wmstudio.model.backends import load_backend
    from wmstudio.model.generation import generate
    from wmstudio.train.prompt_use import prompt_use

    started = time.perf_counter()
    cases = load_cases(corpus, split, rows, seed)
    model = load_backend(str(mdlm))
    baseline = load_backend(str(ar)) if ar else None
    if getattr(model, "kind", None) == "ar":
        raise InvalidInput(Problem("mdlm", f"{mdlm} is an autoregressive model: give the masked diffusion one"))
    rates = {name: Rates() for name in ("raw", "denoiser", "steered", "ar", "neutral_error", "neutral_ok",
                                         "flip_raw", "flip_steered", "flip_ar")}
    has_head = getattr(model, "outcome_head", None) is not None
    free = {"cases": 0, "json_valid": 0, "schema_valid": 0, "same_keys": 0, "from_history": 0, "from_training": 0,
            "from_sketch": 0, "canvas_json_valid": 0, "canvas_same_keys": 0}
    report = EvalReport()
    steered = SamplerSettings(repair=True)
    total = len(cases) + min(diversity_calls, len(cases))

    def run(name: str, backend, case: EvalCase, anchors=(), settings=SamplerSettings()) -> None:
        try:
            sample = generate(backend, case.world, case.call, anchors, case.history, settings).samples[0]
        except InvalidInput as err:
            report.errors.append(f"{case.where} ({name}): {err}")
            return
        rates[name].add(sample.checks, sample.response, case)

    from wmstudio.world.checks import check_step

    for i, case in enumerate(cases):
        for status in ("error", "ok"):
            text = trivial_response(case, status)
            rates[f"neutral_{status}"].add(check_step(case.world, case.call, text, history=case.history), text, case)
        run("raw", model, case)
        if has_head:
            run("denoiser", model, case, settings=SamplerSettings(outcome_head=False))
        run("steered", model, case, settings=steered)
        if baseline is not None:
            run("ar", baseline, case)
        anchor = flip_anchor(case)
        if anchor is not None:
            run("flip_raw", model, case, [anchor])
            run("flip_steered", model, case, [anchor], steered)
            if baseline is not None:
                run("flip_ar", baseline, case, [anchor])
        _score_free(model, case, free, report)
        if progress:
            progress(i + 1, total)
    diversity = {}
    for name, backend in (("mdlm", model), ("ar", baseline)):
        if backend is not None and diversity_calls:
            diversity[name] = _diversity(backend, cases[:diversity_calls], samples, seed, report)
    if progress:
        progress(total, total)
    report.settings = {"mdlm": str(mdlm), "ar": str(ar) if ar else None, "corpus": str(corpus), "split": split,
                       "rows": len(cases), "seed": seed, "samples": samples,
                       "diversity_calls": min(diversity_calls, len(cases))}
    report.denoiser = rates["denoiser"].to_json() if has_head else None
    report.figures = {
        "rows": len(cases),
        "model": str(mdlm),
        "raw": rates["raw"].to_json(),
        "steered": rates["steered"].to_json(),
        "ar": rates["ar"].to_json() if baseline is not None else None,
        "flip": {"raw": rates["flip_raw"].to_json(), "steered": rates["flip_steered"].to_json(),
                 "ar": rates["flip_ar"].to_json() if baseline is not None else None},
        "free": {key: (round(value / free["cases"], 4) if free["cases"] else None) if key != "cases" else value
                 for key, value in free.items()},
        "trivial": {"neutral_error": rates["neutral_error"].to_json(), "neutral_ok": rates["neutral_ok"].to_json()},
        "prompt_use": prompt_use(model, cases),
        "diversity": diversity,
    }
    report.seconds = time.perf_counter() - started
    return report


def _score_free(model, case: EvalCase, free: dict[str, int], report: EvalReport) -> None:
    """No response schema given: the called tool's schema is taken out of the world (and so out of the prompt), so
    JSON validity, the real schema and the simulator's top-level keys are earned. Generation then lays out a
    skeleton of the schema the tool's earlier answers in the history fit (counted in `from_history`), else of the
    one the model was trained with for it (`from_training`, model/trained_schemas.py: a lookup), else, for a model
    trained to, of the sketch it writes of the tool's schema (`from_sketch`), else a free canvas. The free canvas
    alone, every time (`canvas_*`), is what the denoiser does with no skeleton to fill."""
    from wmstudio.model.generation import FROM_HISTORY, FROM_SKETCH, FROM_TRAINING, generate
    from wmstudio.world.checks import schema_errors_of

    real = next((tool for tool in case.world.tools if tool.name == case.call.name), None)
    world = case.world.without_response_schema(case.call.name)
    settings = SamplerSettings(free_length=free_length_for(case, model.tokenizer))
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


def _diversity(backend, cases: list[EvalCase], samples: int, seed: int, report: EvalReport) -> dict[str, float]:
    """Self-BLEU and Distinct-2 over K samples per call, of whole responses and of their values only."""
    from wmstudio.model.generation import generate

    whole, values = [], []
    for j, case in enumerate(cases):
        settings = SamplerSettings(temperature=1.0, samples=samples, seed=seed + j)
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


def write_quality(report: EvalReport, model_dir: Path) -> Path:
    """Save `quality.json` beside the weights and rewrite the model card with the figures."""
    from wmstudio.train.model_card import write_model_card

    path = Path(model_dir) / "quality.json"
    data = {"figures": report.figures, "denoiser": report.denoiser, "table": report.table(), "summary": report.summary(),
            "settings": report.settings, "errors": report.errors[:20], "seconds": round(report.seconds, 1)}
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if (Path(model_dir) / "training.json").exists():
        write_model_card(Path(model_dir))
    return path


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"
