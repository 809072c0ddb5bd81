"""Regular expressions as finite automata, for the span grammars that make text match a pattern and for repair,
which brings text a rule's `matches` rejects to the nearest text that matches.

JSON Schema's `pattern` and CEL's `matches` both search: a pattern matches anywhere in the text unless anchored
with `^...$`. `search_regex` writes that as a whole-text expression and `automaton` compiles one: Python's own
parser reads it, a Thompson NFA is built from the tree, and its subsets are explored into a DFA over ASCII plus one
symbol for every other character. Both are counted as they grow, so a pattern whose automaton explodes
(`.*a.{14}` needs 2^15 states) is refused in milliseconds (`PatternTooComplex`) instead of costing minutes; the
result, refusals included, is remembered, because the sampler steps through the same few automata for every token.
Matching text against a pattern is never done here: that is `linear_patterns`' (RE2, linear time)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from re import _constants as sre
from re import _parser as sre_parse

OTHER = 128  # the symbol of every non-ASCII character (they behave alike in the grammars)
SYMBOLS = 129
ALL = (1 << SYMBOLS) - 1
MAX_PATTERN_CHARS = 1_000  # a pattern's text; real ones are under 200
MAX_NFA_STATES = 5_000  # counted repeats are copied out: `(ab){2000}` is refused here
MAX_DFA_STATES = 2_000  # the span grammar's table holds one row per state
BUILD_SECONDS = 0.5  # CPU time one automaton may take to build
KEPT = 512  # automata (and refusals) remembered


class PatternUnsupported(ValueError):
    """A pattern this compiler does not turn into an automaton (look-arounds, back-references, word boundaries,
    inline flags): its span is left free and the checks judge the text."""


class PatternTooComplex(ValueError):
    """A pattern whose automaton would pass the caps: refused, naming the cap."""


class PatternBudgetSpent(PatternTooComplex):
    """The automata built within one `build_budget` used up its seconds: this pattern was not tried to the end
    (not remembered: another request may build it)."""


class _Account:
    def __init__(self, seconds: float):
        self.seconds, self.spent = seconds, 0.0


_ACCOUNT: ContextVar[_Account | None] = ContextVar("wmstudio_automaton_budget", default=None)
_KEPT: OrderedDict[str, Automaton | ValueError] = OrderedDict()
_KEPT_LOCK = threading.Lock()


@contextmanager
def build_budget(seconds: float) -> Iterator[None]:
    """Bound the CPU time of every automaton built inside (in this context) to `seconds` together: a request
    bringing many costly patterns is refused (PatternBudgetSpent) instead of costing one cap each."""
    token = _ACCOUNT.set(_Account(seconds))
    try:
        yield
    finally:
        _ACCOUNT.reset(token)


@dataclass(frozen=True)
class Automaton:
    """A DFA over ASCII + OTHER: `moves[state][class]` is the next state or -1; state 0 starts. Every move leads to
    a state from which a match can still be reached; `distance[state]` is how many characters it is away (-1: none)."""

    classes: tuple[int, ...]  # each symbol's class
    moves: tuple[tuple[int, ...], ...]
    accepting: frozenset[int]
    distance: tuple[int, ...]
    named: tuple[str, ...]  # the printable characters the pattern names, in code order
    start: int = 0

    @property
    def states(self) -> int:
        return len(self.moves)

    def step(self, state: int, ch: str) -> int | None:
        """The state after `ch`, or None when no text of the pattern goes on with it."""
        nxt = self.moves[state][self.classes[min(ord(ch), OTHER)]]
        return None if nxt < 0 else nxt

    def accepts(self, state: int) -> bool:
        return state in self.accepting


def search_regex(pattern: str) -> str:
    """The whole-text expression for `pattern` as JSON Schema and CEL read it: anchored as it is, else anywhere."""
    anchored = pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")
    return pattern[1:-1] if anchored else f".*({pattern}).*"


def automaton(regex: str) -> Automaton:
    """The automaton of a whole-text expression; PatternUnsupported or PatternTooComplex when there is none."""
    with _KEPT_LOCK:
        made = _KEPT.get(regex)
        if made is not None:
            _KEPT.move_to_end(regex)
    if made is None:
        account = _ACCOUNT.get()
        started = time.thread_time()
        try:
            made = _built(regex, account)
        finally:
            if account is not None:
                account.spent += time.thread_time() - started
        if isinstance(made, PatternBudgetSpent):
            raise made
        with _KEPT_LOCK:
            _KEPT[regex] = made
            while len(_KEPT) > KEPT:
                _KEPT.popitem(last=False)
    if isinstance(made, Exception):
        raise made
    return made


def pattern_automaton(pattern: str) -> Automaton | None:
    """The automaton of a JSON Schema / CEL pattern, or None for one there is none of (unsupported or too big)."""
    try:
        return automaton(search_regex(pattern))
    except ValueError:
        return None


def _built(regex: str, account: _Account | None) -> Automaton | ValueError:
    if len(regex) > MAX_PATTERN_CHARS + len(".*().*"):  # a pattern, with what `search_regex` wraps it in
        return PatternTooComplex(f"the pattern is {len(regex):,} characters, over the {MAX_PATTERN_CHARS:,} a "
                                 "pattern may have")
    try:
        parsed = sre_parse.parse(regex)
    except RecursionError:
        return PatternTooComplex("the pattern nests its groups too deeply")
    except Exception as err:  # noqa: BLE001 - re.error and the parser's other complaints
        return PatternUnsupported(f"the pattern cannot be read: {err}")
    flags = parsed.state.flags
    if flags & ~(sre.SRE_FLAG_IGNORECASE | sre.SRE_FLAG_DOTALL | sre.SRE_FLAG_UNICODE):
        return PatternUnsupported("the pattern sets flags other than i and s")
    try:
        nfa = _Nfa(ignore_case=bool(flags & sre.SRE_FLAG_IGNORECASE), dotall=bool(flags & sre.SRE_FLAG_DOTALL))
        nfa.final = nfa.sequence(parsed, 0)
        return _determinise(nfa, account)
    except (PatternUnsupported, PatternTooComplex) as err:
        return err
    except RecursionError:
        return PatternTooComplex("the pattern nests its groups too deeply")


def _mask(codes) -> int:
    mask = 0
    for code in codes:
        mask |= 1 << min(code, OTHER)
    return mask


_DIGITS = _mask(range(48, 58))
_WORD = _mask([*range(48, 58), *range(65, 91), *range(97, 123), 95, OTHER])
_SPACE = _mask([9, 10, 11, 12, 13, 32, OTHER])
_CATEGORIES = {sre.CATEGORY_DIGIT: _DIGITS, sre.CATEGORY_NOT_DIGIT: ALL & ~_DIGITS,
               sre.CATEGORY_WORD: _WORD, sre.CATEGORY_NOT_WORD: (ALL & ~_WORD) | 1 << OTHER,
               sre.CATEGORY_SPACE: _SPACE, sre.CATEGORY_NOT_SPACE: (ALL & ~_SPACE) | 1 << OTHER}
_REPEATS = {sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT}
_STARTS = {sre.AT_BEGINNING, sre.AT_BEGINNING_STRING}
_ENDS = {sre.AT_END, sre.AT_END_STRING}


class _Nfa:
    """A Thompson NFA: per node, epsilon edges, (symbol mask, node) moves, and edges that hold only at the text's
    start or end."""

    def __init__(self, ignore_case: bool, dotall: bool):
        self.ignore_case, self.dotall = ignore_case, dotall
        self.eps: list[list[int]] = [[]]
        self.moves: list[list[tuple[int, int]]] = [[]]
        self.at_start: list[list[int]] = [[]]
        self.at_end: list[list[int]] = [[]]
        self.named: set[int] = set()
        self.final = 0

    def node(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise PatternTooComplex(f"the pattern spells out over {MAX_NFA_STATES:,} positions (counted repeats are "
                                    "copied out): use smaller counts")
        for table in (self.eps, self.moves, self.at_start, self.at_end):
            table.append([])
        return len(self.eps) - 1

    def sequence(self, items, start: int) -> int:
        for op, arg in items:
            start = self.item(op, arg, start)
        return start

    def move(self, start: int, mask: int) -> int:
        end = self.node()
        self.moves[start].append((mask, end))
        return end

    def item(self, op, arg, start: int) -> int:
        if op is sre.LITERAL:
            return self.move(start, self.literal(arg))
        if op is sre.NOT_LITERAL:
            return self.move(start, ALL & ~self.literal(arg) | 1 << OTHER)
        if op is sre.ANY:
            return self.move(start, ALL if self.dotall else ALL & ~(1 << 10))
        if op is sre.IN:
            return self.move(start, self.charset(arg))
        if op is sre.BRANCH:
            end = self.node()
            for branch in arg[1]:
                self.eps[self.sequence(branch, start)].append(end)
            return end
        if op is sre.SUBPATTERN:
            if arg[1] or arg[2]:
                raise PatternUnsupported("inline flags inside a group")
            return self.sequence(arg[3], start)
        if op is sre.ATOMIC_GROUP:
            return self.sequence(arg, start)
        if op in _REPEATS:
            return self.repeat(*arg, start=start)
        if op is sre.AT and arg in _STARTS | _ENDS:
            end = self.node()
            (self.at_start if arg in _STARTS else self.at_end)[start].append(end)
            return end
        raise PatternUnsupported(f"the pattern uses {str(op).lower()}, which has no automaton")

    def repeat(self, low: int, high, body, start: int) -> int:
        for _ in range(low):
            start = self.sequence(body, start)
        if high is sre.MAXREPEAT:
            loop, end = self.node(), self.node()
            self.eps[start].append(loop)
            self.eps[self.sequence(body, loop)].append(loop)
            self.eps[loop].append(end)
            return end
        exits = []
        for _ in range(high - low):
            exits.append(start)
            start = self.sequence(body, start)
        for node in exits:
            self.eps[node].append(start)
        return start

    def literal(self, code: int) -> int:
        codes = [code]
        if self.ignore_case and chr(code).isalpha():
            codes += [ord(chr(code).lower()), ord(chr(code).upper())]
        self.named.update(c for c in codes if 32 < c < 127)
        return _mask(codes)

    def charset(self, items) -> int:
        mask, negate = 0, False
        for op, arg in items:
            if op is sre.NEGATE:
                negate = True
            elif op is sre.LITERAL:
                mask |= self.literal(arg)
            elif op is sre.RANGE:
                low, high = arg
                for code in range(low, min(high, 127) + 1):
                    mask |= self.literal(code)
                if high >= 128:
                    mask |= 1 << OTHER
            elif op is sre.CATEGORY and arg in _CATEGORIES:
                mask |= _CATEGORIES[arg]
                if arg in (sre.CATEGORY_DIGIT, sre.CATEGORY_WORD):
                    self.named.update(c for c in range(33, 127) if _CATEGORIES[arg] >> c & 1)
            else:
                raise PatternUnsupported("the pattern's character set has a part with no automaton")
        return (ALL & ~mask) | 1 << OTHER if negate else mask


def _determinise(nfa: _Nfa, account: _Account | None) -> Automaton:
    """Explore the NFA's reachable subsets into a DFA, counting states and CPU time as they grow (against the cap
    and what is left of `account`), then drop moves into states from which nothing is accepted."""
    started = time.thread_time()
    left = account.seconds - account.spent if account is not None else BUILD_SECONDS
    masks = sorted({mask for moves in nfa.moves for mask, _ in moves})
    signatures: dict[tuple[bool, ...], int] = {}
    classes = tuple(signatures.setdefault(tuple(bool(m >> s & 1) for m in masks), len(signatures))
                    for s in range(SYMBOLS))
    representatives = [classes.index(c) for c in range(len(signatures))]
    ended = len(nfa.eps)  # node n after the text's end is n + ended: it may not read further

    def closure(nodes, at_start: bool) -> frozenset[int]:
        seen, stack = set(nodes), list(nodes)
        while stack:
            node = stack.pop()
            base, done = (node - ended, True) if node >= ended else (node, False)
            targets = [t + ended if done else t for t in nfa.eps[base]]
            targets += [t + ended for t in nfa.at_end[base]]
            if at_start:
                targets += [t + ended if done else t for t in nfa.at_start[base]]
            for target in targets:
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return frozenset(seen)

    index = {closure([0], True): 0}
    order = list(index)
    moves: list[tuple[int, ...]] = []
    while len(moves) < len(order):
        if len(moves) % 16 == 0:
            spent = time.thread_time() - started
            if spent > BUILD_SECONDS:
                raise PatternTooComplex(f"the pattern's automaton took over {BUILD_SECONDS:g} s to build: simplify it")
            if spent > left:
                raise PatternBudgetSpent(f"the world's patterns took over {account.seconds:g} s of CPU to compile "
                                         "together: use fewer or simpler patterns")
        subset = order[len(moves)]
        row = []
        for symbol in representatives:
            targets = {t for n in subset if n < ended for mask, t in nfa.moves[n] if mask >> symbol & 1}
            if not targets:
                row.append(-1)
                continue
            nxt = closure(targets, False)
            if nxt not in index:
                if len(order) >= MAX_DFA_STATES:
                    raise PatternTooComplex(f"the pattern's automaton passes {MAX_DFA_STATES:,} states (counted "
                                            "repeats after an open-ended part such as `.*` multiply): shorten them")
                index[nxt] = len(order)
                order.append(nxt)
            row.append(index[nxt])
        moves.append(tuple(row))
    accepting = {i for i, subset in enumerate(order) if nfa.final in subset or nfa.final + ended in subset}
    distance = _distances(moves, accepting)
    moves = [tuple(t if t >= 0 and distance[t] >= 0 else -1 for t in row) for row in moves]
    named = tuple(chr(c) for c in sorted(nfa.named))
    return Automaton(classes=classes, moves=tuple(moves), accepting=frozenset(accepting), distance=distance,
                     named=named)


def _distances(moves: list[tuple[int, ...]], accepting: set[int]) -> tuple[int, ...]:
    """Fewest characters from each state to an accepting one, -1 where none is reachable (a search backwards)."""
    incoming: dict[int, list[int]] = {}
    for source, row in enumerate(moves):
        for target in row:
            if target >= 0:
                incoming.setdefault(target, []).append(source)
    distance = [-1] * len(moves)
    for state in accepting:
        distance[state] = 0
    queue = deque(accepting)
    while queue:
        state = queue.popleft()
        for source in incoming.get(state, []):
            if distance[source] < 0:
                distance[source] = distance[state] + 1
                queue.append(source)
    return tuple(distance)
