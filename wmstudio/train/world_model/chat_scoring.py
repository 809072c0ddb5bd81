"""Scoring a corpus in the public chat format, rows without our `meta`: the Patronus paper's protocol.

Each row's last turn is the reference; the model answers the turns before it (model/generation/chat_response.py). Both texts
are normalised as the paper's `evaluate.py` does (drop `<think>...</think>`, unwrap `<tool_response>`, strip tags,
re-dump JSON with sorted keys) and scored by exact match, JSON-semantic match (parsed values equal, so key order
and 100 vs 100.0 do not count) and ROUGE-L F1 over whitespace tokens. Beside them stand two constant answers
on the same rows: `{}` and the most common reference itself (the best any constant could do)."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wmstudio.problems import InvalidInput, Problem

if TYPE_CHECKING:  # examples imports torch; the CLI reads DEFAULT_CHAT_LENGTH at start-up
    from wmstudio.train.world_model.examples import CorpusRow

THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
TAG = re.compile(r"</?[A-Za-z_][A-Za-z0-9_-]*>")
NOT_JSON = object()
DEFAULT_CHAT_LENGTH = 128  # response tokens a model may write for a row (the reference's length is not given)


@dataclass
class MatchRates:
    """Running exact / semantic / ROUGE-L / JSON-valid figures of one answerer over the rows."""

    rows: int = 0
    exact: int = 0
    semantic: int = 0
    json_valid: int = 0
    rouge_total: float = 0.0

    def add(self, prediction: str, reference: str) -> None:
        pred, ref = normalise(prediction), normalise(reference)
        self.rows += 1
        self.exact += int(pred == ref)
        self.semantic += int(semantic_match(pred, ref))
        self.json_valid += int(_json(pred) is not NOT_JSON)
        self.rouge_total += rouge_l(pred, ref)

    def to_json(self) -> dict[str, Any]:
        share = (lambda n: round(n / self.rows, 4)) if self.rows else (lambda n: None)
        return {"rows": self.rows, "exact_match": share(self.exact), "semantic_match": share(self.semantic),
                "rouge_l_f1": share(self.rouge_total), "json_valid": share(self.json_valid)}


@dataclass
class ChatReport:
    """Figures per answerer (`mdlm`, `ar`, and the constant baselines), with the settings and any row errors."""

    figures: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"protocol": "chat", **self.figures, "settings": self.settings, "errors": len(self.errors),
                "seconds": round(self.seconds, 1)}

    def render(self) -> str:
        """A plain table: one line per answerer."""
        lines = [f"chat-format corpus, {self.figures.get('rows', 0)} rows (exact / JSON-semantic / ROUGE-L F1 / "
                 "JSON valid)"]
        for name, label in (("mdlm", "MDLM"), ("ar", "AR baseline"), ("constant_empty", "constant {}"),
                            ("constant_majority", "constant: the commonest reference")):
            rates = self.figures.get(name)
            if rates:
                lines.append(f"  {label:<36} " + "  ".join(
                    "—" if rates[key] is None else f"{100 * rates[key]:.1f}%"
                    for key in ("exact_match", "semantic_match", "rouge_l_f1", "json_valid")))
        return "\n".join(lines)


def normalise(text: str) -> str:
    """The paper's normalisation: no think blocks or tags, stripped; JSON re-dumped with sorted keys."""
    text = THINK.sub("", text)
    text = TAG.sub("", text).strip()
    value = _json(text)
    if value is NOT_JSON:
        return text
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def semantic_match(prediction: str, reference: str) -> bool:
    """Parsed JSON values equal (texts equal when either is not JSON)."""
    pred, ref = _json(prediction), _json(reference)
    if pred is NOT_JSON or ref is NOT_JSON:
        return prediction == reference
    return pred == ref


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F1: the longest common subsequence of whitespace tokens against both lengths."""
    pred, ref = prediction.split(), reference.split()
    if not pred or not ref:
        return float(pred == ref)
    previous = [0] * (len(ref) + 1)
    for token in pred:
        current = [0]
        for j, other in enumerate(ref, start=1):
            current.append(previous[j - 1] + 1 if token == other else max(previous[j], current[j - 1]))
        previous = current
    lcs = previous[-1]
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(pred), lcs / len(ref)
    return 2 * precision * recall / (precision + recall)


def load_chat_rows(corpus: Path, split: str = "test", rows: int = 200, seed: int = 0) -> list[CorpusRow]:
    """A seeded sample of `rows` rows of `<corpus>/<split>.jsonl` (any chat rows; `meta` is not needed)."""
    from wmstudio.train.world_model.examples import read_corpus_split

    every = read_corpus_split(corpus, split)
    if not every:
        raise InvalidInput(Problem(f"{corpus}/{split}.jsonl", "holds no rows"))
    picked = list(every)
    random.Random(seed).shuffle(picked)
    return picked[:rows]


def score_chat_corpus(mdlm: str | Path, ar: str | Path | None, corpus: Path, rows: int = 200, split: str = "test",
                      seed: int = 0, length: int = DEFAULT_CHAT_LENGTH,
                      progress: Callable[[int, int], None] | None = None) -> ChatReport:
    """Score the MDLM at `mdlm` (and the AR model at `ar`) on `rows` chat rows of `corpus`, greedy, beside the
    two constant answers."""
    from wmstudio.model.generation.chat_response import respond_to_chat
    from wmstudio.model.serving.backends import load_backend

    started = time.perf_counter()
    cases = load_chat_rows(corpus, split, rows, seed)
    answerers = {"mdlm": load_backend(str(mdlm))}
    if ar:
        answerers["ar"] = load_backend(str(ar))
    rates = {name: MatchRates() for name in [*answerers, "constant_empty", "constant_majority"]}
    report = ChatReport()
    commonest = Counter(normalise(row.response_text) for row in cases).most_common(1)[0][0]
    for i, row in enumerate(cases):
        rates["constant_empty"].add("{}", row.response_text)
        rates["constant_majority"].add(commonest, row.response_text)
        for name, backend in answerers.items():
            try:
                answer = respond_to_chat(backend, row.prompt_text, row.prompt_messages, length)
            except InvalidInput as err:
                report.errors.append(f"{row.where} ({name}): {err}")
                continue
            rates[name].add(answer, row.response_text)
        if progress:
            progress(i + 1, len(cases))
    report.figures = {"rows": len(cases), **{name: r.to_json() for name, r in rates.items()}}
    report.settings = {"mdlm": str(mdlm), "ar": str(ar) if ar else None, "corpus": str(corpus), "split": split,
                       "rows": len(cases), "seed": seed, "length": length}
    report.seconds = time.perf_counter() - started
    return report


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, ValueError):
        return NOT_JSON
