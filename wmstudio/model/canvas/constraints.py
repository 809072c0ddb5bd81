"""Type constraints for canvas spans: character grammars (grammars.py) compiled into per-token tables.

A span's grammar (integer, number, option list, JSON string content, typed array, bounded JSON, or
any text for a free span) runs over the characters of each token, so any tokenisation of a valid value
is allowed. With the span's committed tokens fixed and its masked slots free, a forward/backward pass
over the grammar's states tells which tokens keep the span completable at each masked slot: sampling
only those, committing slot by slot, always ends in a value the grammar accepts. Pads (removed
afterwards) give values variable length, and they may only trail a complete value: a pad closes the
span, after it only pads follow. That is how training lays values out, so a half-written value never
has a hole in it. Tables are built once per tokenizer."""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Hashable, Sequence

import torch

from wmstudio.model.canvas.grammars import AnyText

DEAD = -1
MAX_TABLES = 512  # grammar tables kept per vocabulary; one per distinct span grammar (type, enum, pattern, format)
END = "end"  # the kind of a canvas span of one slot that may close an array before its item (layout.py)
OTHER = "\x80"  # every non-ASCII character behaves alike in our grammars: plain string content


# ----------------------------------------------------------------------------------------------------
# Vocabulary: what text each token stands for, once per tokenizer.


@dataclass
class Vocabulary:
    """Each token id's text (None for special tokens), the pad id, and the grammar tables built so far.

    Byte-level BPE tokens are read as their raw bytes (one latin-1 character per byte), so the text of
    a token sequence is exactly the concatenation of its tokens' texts."""

    texts: list[str | None]
    pad_id: int
    byte_level: bool
    tables: OrderedDict[Hashable, "GrammarTable"] = field(default_factory=OrderedDict)  # least recently used first

    @property
    def size(self) -> int:
        return len(self.texts)

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` with pads (and any special token) dropped."""
        pieces = [self.texts[i] for i in ids if 0 <= i < len(self.texts) and self.texts[i] is not None]
        joined = "".join(pieces)
        return joined.encode("latin-1").decode("utf-8", errors="replace") if self.byte_level else joined

    def table(self, grammar: Any) -> "GrammarTable":
        """The transition table of `grammar` over this vocabulary (built on first use, then cached; the cache
        keeps the MAX_TABLES most recently used, since users' schemas make new grammars without end)."""
        key = (type(grammar).__name__, grammar)
        table = self.tables.get(key)
        if table is None:
            table = self.tables[key] = build_table(grammar, self)
            while len(self.tables) > MAX_TABLES:
                self.tables.popitem(last=False)
        else:
            self.tables.move_to_end(key)
        return table


_VOCABULARIES: "weakref.WeakKeyDictionary[Any, dict[tuple[int, int], Vocabulary]]" = weakref.WeakKeyDictionary()


def vocabulary_for(tokenizer: Any, vocab_size: int | None = None, pad_id: int | None = None) -> Vocabulary:
    """The Vocabulary of `tokenizer` padded to `vocab_size` ids (a model's embedding rows), cached;
    `pad_id` is the span filler (default: the tokenizer's pad token)."""
    size = max(vocab_size or 0, len(tokenizer))
    pad = tokenizer.pad_token_id if pad_id is None else pad_id
    if pad is None:
        raise ValueError("the tokenizer has no pad token: the canvas needs one to fill unused span slots")
    cached = _VOCABULARIES.setdefault(tokenizer, {})
    if (size, pad) not in cached:
        cached[(size, pad)] = _read_vocabulary(tokenizer, size, pad)
    return cached[(size, pad)]


def _read_vocabulary(tokenizer: Any, size: int, pad_id: int) -> Vocabulary:
    byte_decoder = {char: byte for byte, char in _bytes_to_unicode().items()}
    special = set(tokenizer.all_special_ids) | {
        i for i, added in getattr(tokenizer, "added_tokens_decoder", {}).items() if getattr(added, "special", False)
    }
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    as_bytes, mapped = [], 0
    for i, token in enumerate(tokens):
        if token is None or i in special:
            as_bytes.append(None)
            continue
        if all(char in byte_decoder for char in token):
            as_bytes.append(bytes(byte_decoder[char] for char in token).decode("latin-1"))
            mapped += 1
        else:
            as_bytes.append(None)
    ordinary = sum(1 for i, t in enumerate(tokens) if t is not None and i not in special)
    byte_level = ordinary > 0 and mapped >= 0.95 * ordinary
    if byte_level:
        texts = as_bytes
    else:  # WordPiece / SentencePiece: each token's own text, glued as the grammar sees it
        texts = [None if (t is None or i in special) else _piece_text(tokenizer, t) for i, t in enumerate(tokens)]
    texts = texts + [None] * (size - len(texts))
    texts[pad_id] = ""
    return Vocabulary(texts=texts, pad_id=pad_id, byte_level=byte_level)


def _piece_text(tokenizer: Any, token: str) -> str:
    if token.startswith("##"):
        return token[2:]
    if token.startswith("\u2581"):
        return " " + token[1:]
    return tokenizer.convert_tokens_to_string([token])


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map used by byte-level BPE vocabularies."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + extra)
            extra += 1
    return mapping


# ----------------------------------------------------------------------------------------------------
# Tables: next state of every (state, token); the pad keeps the state; special tokens are dead.


@dataclass
class GrammarTable:
    """`next_state[s, t]` (DEAD = -1), `accepting[s]`, and `successors[s]` (states one token away)."""

    next_state: torch.Tensor
    accepting: list[bool]
    successors: list[frozenset[int]]
    start: int = 0
    columns: dict[int, list[int]] = field(default_factory=dict)
    _classes: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    @property
    def states(self) -> int:
        return len(self.accepting)

    def column(self, token: int) -> list[int]:
        """Next state of every state on `token`, as a plain list (cached: spans look these up often)."""
        if token not in self.columns:
            self.columns[token] = self.next_state[:, token].tolist()
        return self.columns[token]

    def token_classes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(the distinct columns of `next_state`, each token's column among them): tokens that move every state
        alike (most letters inside a JSON string) are one class, so a mask is worked out per class (a JSON grammar's
        4,096 tokens fall into about a hundred) and spread to the tokens after."""
        if self._classes is None:
            self._classes = torch.unique(self.next_state, dim=1, return_inverse=True)
        return self._classes


MAX_STATES = 4000


def build_table(grammar: Any, vocab: Vocabulary) -> GrammarTable:
    """Explore `grammar`'s states over an ASCII-plus-OTHER alphabet, then run every token through them.

    One state is added after the grammar's own: `closed`, reached by a pad from an accepting state;
    it accepts, and only pads leave it (to itself)."""
    alphabet = [chr(c) for c in range(128)] + [OTHER]
    index = {grammar.start(): 0}
    order = [grammar.start()]
    char_rows: list[list[int]] = []
    while len(char_rows) < len(order):
        state = order[len(char_rows)]
        row = []
        for ch in alphabet:
            nxt = grammar.step(state, ch)
            if nxt is None:
                row.append(DEAD)
                continue
            if nxt not in index:
                if len(order) >= MAX_STATES:
                    raise ValueError(f"grammar {grammar} has over {MAX_STATES} states: simplify the schema")
                index[nxt] = len(order)
                order.append(nxt)
            row.append(index[nxt])
        char_rows.append(row)
    n = len(order)
    accepting = [bool(grammar.accepts(state)) for state in order]
    # char table with an absorbing dead row n; column per alphabet character
    char_table = torch.tensor(char_rows + [[n] * len(alphabet)], dtype=torch.int32)
    char_table[char_table == DEAD] = n
    grammar_next = _run_tokens(char_table, vocab, n)
    grammar_next[grammar_next == n] = DEAD
    closed = n
    next_state = torch.full((n + 1, grammar_next.shape[1]), DEAD, dtype=grammar_next.dtype)
    next_state[:n] = grammar_next
    next_state[:n, vocab.pad_id] = torch.tensor([closed if ok else DEAD for ok in accepting], dtype=grammar_next.dtype)
    next_state[closed, vocab.pad_id] = closed
    accepting.append(True)
    n += 1
    successors = []
    for s in range(n):
        row = next_state[s]
        successors.append(frozenset(int(x) for x in torch.unique(row[row >= 0]).tolist()))
    return GrammarTable(next_state=next_state, accepting=accepting, successors=successors)


def _run_tokens(char_table: torch.Tensor, vocab: Vocabulary, dead: int) -> torch.Tensor:
    """Fold every token's characters through the char table from every state at once: (states, V)."""
    n = char_table.shape[0] - 1
    texts = vocab.texts
    lengths = torch.tensor([len(t) if t else 0 for t in texts])
    order = torch.argsort(lengths, descending=True)
    longest = int(lengths.max()) if len(texts) else 0
    columns = torch.zeros((len(texts), max(longest, 1)), dtype=torch.long)
    for i, text in enumerate(texts):
        if text:
            columns[i, : len(text)] = torch.tensor([ord(c) if ord(c) < 128 else 128 for c in text])
    states = torch.arange(n, dtype=torch.int32).view(n, 1).expand(n, len(texts)).clone()
    sorted_lengths = lengths[order]
    for j in range(longest):
        live = int((sorted_lengths > j).sum())
        ids = order[:live]
        states[:, ids] = char_table[states[:, ids].long(), columns[ids, j].view(1, -1)]
    special = torch.tensor([t is None for t in texts], dtype=torch.bool)
    states[:, special] = dead
    return states


# ----------------------------------------------------------------------------------------------------
# Spans: which tokens keep a partly committed span completable.


def _forward(table: GrammarTable, tokens: Sequence[int | None]) -> list[set[int]]:
    reach = [{table.start}]
    for token in tokens:
        here = reach[-1]
        if token is None:  # any token, the pad included (its move is in the table)
            nxt = set()
            for s in here:
                nxt |= table.successors[s]
        else:
            column = table.column(token)
            nxt = {column[s] for s in here} - {DEAD}
        reach.append(nxt)
    return reach


def _backward(table: GrammarTable, tokens: Sequence[int | None]) -> list[set[int]]:
    ok = [{s for s in range(table.states) if table.accepting[s]}]
    for token in reversed(tokens):
        after = ok[0]
        if token is None:
            here = {s for s in range(table.states) if table.successors[s] & after}
        else:
            column = table.column(token)
            here = {s for s in range(table.states) if column[s] in after}
        ok.insert(0, here)
    return ok


def completable(table: GrammarTable, tokens: Sequence[int | None]) -> bool:
    """True when the masked slots (None) of `tokens` can still be filled into a value the grammar accepts."""
    return any(table.accepting[s] for s in _forward(table, tokens)[-1])


def allowed_tokens(table: GrammarTable, tokens: Sequence[int | None]) -> torch.Tensor:
    """(len(tokens), V) bool: at each masked slot, the tokens after which the span stays completable.

    Committed slots get an all-False row (they are never resampled). A row depends only on the states
    reachable before the slot and those that can finish after it, so equal pairs share one row (most
    slots of a long span have the same pair)."""
    forward, backward = _forward(table, tokens), _backward(table, tokens)
    allowed = torch.zeros((len(tokens), table.next_state.shape[1]), dtype=torch.bool)
    classes, token_class = table.token_classes()
    rows_by_states: dict[tuple[frozenset[int], frozenset[int]], torch.Tensor] = {}
    for k, token in enumerate(tokens):
        if token is not None or not forward[k]:
            continue
        key = (frozenset(forward[k]), frozenset(backward[k + 1]))
        if key not in rows_by_states:
            good = torch.zeros(table.states + 1, dtype=torch.bool)  # last entry: DEAD
            if key[1]:
                good[list(key[1])] = True
            rows_by_states[key] = good[classes[list(key[0])].long()].any(dim=0)[token_class]
        allowed[k] = rows_by_states[key]
    return allowed


# ----------------------------------------------------------------------------------------------------
# A canvas's constraints during sampling, one copy per sample.


class CanvasConstraints:
    """Allowed-token masks `(K, C, V)` for the masked slots of K copies of a canvas, kept exact as slots
    are committed: a commit that would leave its span uncompletable is refused (the slot stays masked).

    An array's `end` span (one slot) allows the pad (keep the item) or the canvas's end token. Slots whose
    tokens are settled by a commit are committed with it, so no step is spent on them: after a pad, the
    rest of its span (pads); after an end token, every slot it cuts (pads, and end tokens in end spans)."""

    def __init__(self, canvas: Any, samples: int, vocab_size: int, device: torch.device | str = "cpu"):
        self.canvas, self.samples, self.vocab_size = canvas, samples, vocab_size
        self.tables = [None if s.kind == END else canvas.vocab.table(s.grammar or AnyText()) for s in canvas.spans]
        self.filled: list[list[list[int | None]]] = [
            [[None] * span.length for span in canvas.spans] for _ in range(samples)
        ]
        self.allowed = torch.zeros((samples, len(canvas.tokens), vocab_size), dtype=torch.bool, device=device)
        for i, span in enumerate(canvas.spans):
            if span.kind == END:
                self.allowed[:, span.start] = False
                self.allowed[:, span.start, [canvas.pad_id, canvas.end_id]] = True
            else:
                rows = self._fit(allowed_tokens(self.tables[i], self.filled[0][i])).to(device)
                self.allowed[:, span.start : span.end] = rows

    def _fit(self, mask: torch.Tensor) -> torch.Tensor:
        """Cut or pad the last dimension to the model's vocabulary size (extra ids are never allowed)."""
        size = mask.shape[-1]
        if size >= self.vocab_size:
            return mask[..., : self.vocab_size]
        pad = torch.zeros((*mask.shape[:-1], self.vocab_size - size), dtype=torch.bool)
        return torch.cat([mask, pad], dim=-1)

    def commit(self, chosen: torch.Tensor, tokens: torch.Tensor, confidence: torch.Tensor,
               chained: torch.Tensor | None = None) -> torch.Tensor:
        """The subset of `chosen` (K, C) that can be committed with `tokens`, most confident first, plus the
        slots those commits settle (written into `tokens` with confidence 1, in place); updates the allowed
        masks of every span that changed. A `chained` slot is kept only when the slot before it is (no hole
        opens in a value written in order)."""
        kept = torch.zeros_like(chosen)
        span_of = self.canvas.span_of
        spans = self.canvas.spans
        chosen_cpu, tokens_cpu, confidence_cpu = chosen.cpu(), tokens.cpu(), confidence.float().cpu()
        chained_cpu = chained.cpu() if chained is not None else None
        for k in range(self.samples):
            positions = chosen_cpu[k].nonzero().flatten().tolist()
            positions.sort(key=lambda p: -float(confidence_cpu[k, p]))
            touched: set[int] = set()
            settled: list[range] = []
            for position in positions:
                if chained_cpu is not None and chained_cpu[k, position] and not kept[k, position - 1]:
                    continue
                i = span_of[position]
                slots = self.filled[k][i]
                token = int(tokens_cpu[k, position])
                slots[position - spans[i].start] = token
                table = self.tables[i]
                if table is not None and i in touched and not completable(table, slots):
                    slots[position - spans[i].start] = None  # conflicts with a more confident commit
                    continue
                kept[k, position] = True
                touched.add(i)
                if spans[i].kind == END and token == self.canvas.end_id:
                    settled.append(range(position + 1, spans[i].until))
                elif spans[i].kind != END and token == self.canvas.pad_id:
                    settled.append(range(position + 1, spans[i].end))
            for positions_settled in settled:
                for position in positions_settled:
                    j = span_of[position]
                    slot = position - spans[j].start if j >= 0 else 0
                    if j < 0 or (self.filled[k][j][slot] is not None and not kept[k, position]):
                        continue  # an anchor, or committed in an earlier step
                    token = self.canvas.end_id if spans[j].kind == END else self.canvas.pad_id
                    self.filled[k][j][slot] = token
                    kept[k, position] = True
                    tokens[k, position] = token
                    confidence[k, position] = 1.0
                    touched.add(j)
            for i in touched:
                if self.tables[i] is not None:
                    rows = self._fit(allowed_tokens(self.tables[i], self.filled[k][i]))
                    self.allowed[k, spans[i].start : spans[i].end] = rows.to(self.allowed.device)
        return kept
