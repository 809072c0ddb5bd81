"""Quality of a trained world model on held-out rows of the simulated worlds, measured with `generate`.

Skeleton mode (JSON-, schema-, rule-validity), an outcome-flipping anchor pinned at the end (MDLM beside
the AR baseline), free mode, and diversity over K samples at temperature 1 (Self-BLEU, Distinct-2)."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmstudio.metrics.diversity import distinct_n, self_bleu
from wmstudio.model.sampler import SamplerSettings
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.examples import FREE_LENGTHS, read_corpus_split, world_from_meta
from wmstudio.world.anchors import Anchor
from wmstudio.world.checks import CheckReport
from wmstudio.world.history import HistoryStep, parse_history
from wmstudio.world.spec import Call, WorldSpec

TARGETS = {
    "skeleton_json_valid": 1.0,
    "skeleton_schema_valid": 0.98,
    "skeleton_rule_consistent": 0.95,
    "flip_rule_consistent_mdlm": 0.90,
    "free_json_valid": 0.90,
}
ERROR_STATUS = "error"


@dataclass
class EvalCase:
    """One held-out row: the world it came from, the call, the earlier steps and the true response."""

    world: WorldSpec
    call: Call
    history: list[HistoryStep]
    truth: str
    where: str


@dataclass
class Rates:
    """Counts of check outcomes over a set of responses, read as rates."""

    total: int = 0
    json_valid: int = 0
    schema_valid: int = 0
    rule_consistent: int = 0
    anchors_kept: int = 0
    exact: int = 0
    same_status: int = 0  # the response's `status` is the simulator's (did the model get the outcome right?)

    def add(self, report: CheckReport, response: str, truth: str | None = None) -> None:
        self.total += 1
        self.json_valid += report.json_valid
        self.schema_valid += report.json_valid and not report.schema_errors
        self.rule_consistent += report.json_valid and not report.rule_violations
        self.anchors_kept += report.json_valid and not report.anchor_violations
        if truth is not None:
            self.exact += _same_json(response, truth)
            status = _status(response)
            self.same_status += status is not None and status == _status(truth)

    def rate(self, name: str) -> float:
        return round(getattr(self, name) / self.total, 4) if self.total else 0.0

    def to_json(self) -> dict[str, Any]:
        names = ("json_valid", "schema_valid", "rule_consistent", "anchors_kept", "exact", "same_status")
        return {"cases": self.total, **{name: self.rate(name) for name in names}}


@dataclass
class EvalReport:
    """All figures of one evaluation, the table printed and put in the model card, and timing."""

    figures: dict[str, Any] = field(default_factory=dict)
    table: list[dict[str, str]] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"figures": self.figures, "table": self.table, "settings": self.settings,
                "seconds": round(self.seconds, 1), "summary": self.summary()}

    def summary(self) -> str:
        s = self.settings
        return (f"Measured by `wmstudio eval-wm` on {s.get('rows')} held-out rows of the `{s.get('split')}` split "
                f"(corpus `{s.get('corpus')}`), greedy decoding with the default sampler settings unless noted; "
                f"diversity over {s.get('samples')} samples at temperature 1 for {s.get('diversity_calls')} calls.")

    def render(self) -> str:
        """The table as aligned plain text for a terminal."""
        width = max(len(row["measure"]) for row in self.table) if self.table else 10
        lines = [f"{'measure':<{width}}  {'value':>8}  target"]
        lines += [f"{row['measure']:<{width}}  {row['value']:>8}  {row.get('target', '')}" for row in self.table]
        return "\n".join(lines)


def load_cases(corpus: Path, split: str = "test", rows: int = 60, seed: int = 0) -> list[EvalCase]:
    """Held-out rows that carry `meta` (simulated worlds), a seeded sample of `rows` of them."""
    corpus_rows = [row for row in read_corpus_split(corpus, split) if row.meta]
    if not corpus_rows:
        raise InvalidInput(Problem(f"{corpus}/{split}.jsonl", "no rows with `meta`: evaluate on a `wmstudio corpus` folder"))
    random.Random(seed).shuffle(corpus_rows)
    cases = []
    for row in corpus_rows[:rows]:
        meta = row.meta
        cases.append(EvalCase(world=world_from_meta(meta, row.where), call=Call.from_json(meta["call"]),
                              history=parse_history(meta.get("history"), f"{row.where}.meta.history"),
                              truth=row.response_text, where=row.where))
    return cases


def flip_anchor(case: EvalCase) -> Anchor | None:
    """`status="error"` when the true response succeeded and the tool's schema ends with an error-able status."""
    try:
        schema = case.world.tool(case.call.name).response or {}
    except KeyError:
        return None
    properties = list((schema.get("properties") or {}).items())
    if not properties or properties[-1][0] != "status" or ERROR_STATUS not in (properties[-1][1].get("enum") or []):
        return None
    try:
        truth = json.loads(case.truth)
    except json.JSONDecodeError:
        return None
    if not isinstance(truth, dict) or truth.get("status") == ERROR_STATUS:
        return None
    return Anchor("status", ERROR_STATUS)


def free_length_for(case: EvalCase, tokenizer) -> int:
    """A free canvas as long as the tool's skeleton (schema-derived, known before sampling), in a standard size."""
    from wmstudio.model.canvas import build_canvas

    try:
        schema = case.world.tool(case.call.name).response
        need = len(build_canvas(tokenizer, schema)) if schema else FREE_LENGTHS[1]
    except (KeyError, InvalidInput):
        need = FREE_LENGTHS[1]
    return next((size for size in FREE_LENGTHS if size >= need), FREE_LENGTHS[-1])


def evaluate_world_model(
    mdlm: str | Path,
    ar: str | Path | None,
    corpus: Path,
    rows: int = 60,
    diversity_calls: int = 8,
    samples: int = 8,
    split: str = "test",
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """Evaluate the MDLM at `mdlm` (and the AR baseline at `ar`) on `rows` held-out rows of `corpus`.

    Each case is generated with `wmstudio.model.generation.generate` and judged by `check_step`, so the
    figures are what a user of the studio gets with the default settings."""
    from wmstudio.model.backends import load_backend
    from wmstudio.model.generation import generate

    started = time.perf_counter()
    cases = load_cases(corpus, split, rows, seed)
    model = load_backend(str(mdlm))
    baseline = load_backend(str(ar)) if ar else None
    if getattr(model, "kind", None) == "ar":
        raise InvalidInput(Problem("mdlm", f"{mdlm} is an autoregressive model: give the masked diffusion one"))
    skeleton, free, ar_plain = Rates(), Rates(), Rates()
    flip_mdlm, flip_ar = Rates(), Rates()
    diversity: dict[str, list[tuple[float, float]]] = {"mdlm": [], "ar": []}
    errors: list[str] = []
    total = len(cases) + min(diversity_calls, len(cases))
    for i, case in enumerate(cases):
        try:
            result = generate(model, case.world, case.call, (), case.history).samples[0]
            skeleton.add(result.checks, result.response, case.truth)
            free_settings = SamplerSettings(free=True, free_length=free_length_for(case, model.tokenizer))
            result = generate(model, case.world, case.call, (), case.history, free_settings).samples[0]
            free.add(result.checks, result.response, case.truth)
            if baseline is not None:
                result = generate(baseline, case.world, case.call, (), case.history).samples[0]
                ar_plain.add(result.checks, result.response, case.truth)
            anchor = flip_anchor(case)
            if anchor is not None:
                result = generate(model, case.world, case.call, [anchor], case.history).samples[0]
                flip_mdlm.add(result.checks, result.response)
                if baseline is not None:
                    result = generate(baseline, case.world, case.call, [anchor], case.history).samples[0]
                    flip_ar.add(result.checks, result.response)
        except InvalidInput as err:
            errors.append(f"{case.where}: {err}")
        if progress:
            progress(i + 1, total)
    for j, case in enumerate(cases[:diversity_calls]):
        for name, backend in (("mdlm", model), ("ar", baseline)):
            if backend is None:
                continue
            try:
                generation = generate(backend, case.world, case.call, (), case.history,
                                      SamplerSettings(temperature=1.0, samples=samples, seed=seed + j))
            except InvalidInput as err:
                errors.append(f"{case.where} ({name}, diversity): {err}")
                continue
            texts = [s.response for s in generation.samples]
            diversity[name].append((self_bleu(texts), distinct_n(texts, 2)))
        if progress:
            progress(len(cases) + j + 1, total)

    report = EvalReport(settings={"mdlm": str(mdlm), "ar": str(ar) if ar else None, "corpus": str(corpus),
                                  "split": split, "rows": len(cases), "seed": seed, "samples": samples,
                                  "diversity_calls": min(diversity_calls, len(cases))})
    report.figures = {
        "skeleton": skeleton.to_json(),
        "free": free.to_json(),
        "ar": ar_plain.to_json() if baseline is not None else None,
        "flip_mdlm": flip_mdlm.to_json(),
        "flip_ar": flip_ar.to_json() if baseline is not None else None,
        "diversity": {name: _mean_pairs(values) for name, values in diversity.items() if values},
        "errors": errors,
    }
    report.table = _table(report.figures)
    report.seconds = time.perf_counter() - started
    return report


def write_quality(report: EvalReport, model_dir: Path) -> Path:
    """Save `quality.json` beside the weights and rewrite the model card with the figures."""
    from wmstudio.train.training import write_model_card

    path = Path(model_dir) / "quality.json"
    path.write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
    if (Path(model_dir) / "training.json").exists():
        write_model_card(Path(model_dir))
    return path


def _table(f: dict[str, Any]) -> list[dict[str, str]]:
    def pct(value: float) -> str:
        return f"{100 * value:.1f}%"

    rows = [
        ("MDLM skeleton: JSON-valid", pct(f["skeleton"]["json_valid"]), ">= 100%"),
        ("MDLM skeleton: schema-valid", pct(f["skeleton"]["schema_valid"]), ">= 98%"),
        ("MDLM skeleton: rule-consistent", pct(f["skeleton"]["rule_consistent"]), ">= 95%"),
        ("MDLM skeleton: exact match with the simulator", pct(f["skeleton"]["exact"]), ""),
        ("MDLM skeleton: same status as the simulator", pct(f["skeleton"]["same_status"]), ""),
        (f"MDLM, status=\"error\" pinned at the end: rule-consistent (n={f['flip_mdlm']['cases']})",
         pct(f["flip_mdlm"]["rule_consistent"]), ">= 90%"),
        ("MDLM, status=\"error\" pinned: anchor kept", pct(f["flip_mdlm"]["anchors_kept"]), ""),
        ("MDLM free mode: JSON-valid", pct(f["free"]["json_valid"]), ">= 90%"),
        ("MDLM free mode: schema-valid", pct(f["free"]["schema_valid"]), ""),
    ]
    if f.get("ar"):
        rows += [
            ("AR baseline: JSON-valid", pct(f["ar"]["json_valid"]), ""),
            ("AR baseline: schema-valid", pct(f["ar"]["schema_valid"]), ""),
            ("AR baseline: rule-consistent", pct(f["ar"]["rule_consistent"]), ""),
            ("AR baseline: exact match with the simulator", pct(f["ar"]["exact"]), ""),
            ("AR baseline: same status as the simulator", pct(f["ar"]["same_status"]), ""),
            ("AR, status=\"error\" as a directive: rule-consistent", pct(f["flip_ar"]["rule_consistent"]), "(beside MDLM)"),
            ("AR, status=\"error\" as a directive: anchor kept", pct(f["flip_ar"]["anchors_kept"]), ""),
        ]
    for name, values in f.get("diversity", {}).items():
        rows += [(f"{name.upper()} Self-BLEU (lower = more diverse)", f"{values['self_bleu']:.3f}", ""),
                 (f"{name.upper()} Distinct-2 (higher = more diverse)", f"{values['distinct_2']:.3f}", "")]
    return [{"measure": m, "value": v, "target": t} for m, v, t in rows]


def _mean_pairs(values: list[tuple[float, float]]) -> dict[str, float]:
    return {"self_bleu": round(sum(v[0] for v in values) / len(values), 4),
            "distinct_2": round(sum(v[1] for v in values) / len(values), 4), "calls": len(values)}


def _status(text: str) -> Any:
    """The top-level `status` of a JSON object response, else None."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value.get("status") if isinstance(value, dict) else None


def _same_json(response: str, truth: str) -> bool:
    try:
        return json.loads(response) == json.loads(truth)
    except json.JSONDecodeError:
        return False
