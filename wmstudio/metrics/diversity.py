"""Diversity of sampled responses: Self-BLEU (lower = more diverse) and Distinct-N (higher = more diverse).

Small own implementations of the two figures the world-model paper reports, so K samples per call from
the MDLM and the AR baseline can be compared on the same footing."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

TOKEN_PATTERN = re.compile(r"\w+|[^\w\s]")
SMOOTHING_EPSILON = 0.1


def word_tokens(text: str) -> list[str]:
    """Split text into words/numbers and single punctuation marks, so compact JSON gets real tokens.

    `{"status":"ok"}` -> `{ " status " : " ok " }`: whitespace splitting would make one token of it."""
    return TOKEN_PATTERN.findall(text)


def ngrams(tokens: Sequence[str], n: int) -> Counter:
    """Counts of the n-grams (as tuples) of one token sequence."""
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def sentence_bleu(hypothesis: Sequence[str], references: Sequence[Sequence[str]], max_n: int = 4) -> float:
    """BLEU of one token sequence against several references (uniform weights up to `max_n`).

    Clipped n-gram precisions, brevity penalty against the closest reference length, and epsilon
    smoothing (a zero match count becomes 0.1, NLTK's `method1`) so short texts do not all score 0."""
    if not hypothesis or not references:
        return 0.0
    log_precision = 0.0
    for n in range(1, max_n + 1):
        counts = ngrams(hypothesis, n)
        total = sum(counts.values())
        if total == 0:
            return 0.0  # hypothesis shorter than n tokens: no n-gram evidence at all
        max_ref: Counter = Counter()
        for reference in references:
            for gram, count in ngrams(reference, n).items():
                max_ref[gram] = max(max_ref[gram], count)
        matched = sum(min(count, max_ref[gram]) for gram, count in counts.items())
        log_precision += math.log((matched or SMOOTHING_EPSILON) / total) / max_n
    hyp_len = len(hypothesis)
    closest = min((abs(len(r) - hyp_len), len(r)) for r in references)[1]
    brevity = 1.0 if hyp_len > closest else math.exp(1 - closest / hyp_len)
    return brevity * math.exp(log_precision)


def self_bleu(texts: Sequence[str], max_n: int = 4) -> float:
    """Mean BLEU of each text against all the others: 1.0 when all samples are identical.

    Needs at least two texts; with fewer there is nothing to compare, so it returns 0.0."""
    tokenised = [word_tokens(t) for t in texts]
    if len(tokenised) < 2:
        return 0.0
    scores = [
        sentence_bleu(hyp, tokenised[:i] + tokenised[i + 1 :], max_n) for i, hyp in enumerate(tokenised)
    ]
    return sum(scores) / len(scores)


def distinct_n(texts: Sequence[str], n: int = 2) -> float:
    """Unique n-grams over all n-grams, pooled over the texts: 1.0 when no n-gram repeats anywhere."""
    pooled: Counter = Counter()
    for text in texts:
        pooled.update(ngrams(word_tokens(text), n))
    total = sum(pooled.values())
    return len(pooled) / total if total else 0.0
