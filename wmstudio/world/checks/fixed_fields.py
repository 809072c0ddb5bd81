"""The fields a world's rules fix before the model writes: what a rule says a response must hold, given the fields
decided so far (the outcome's status and code, the identifiers the call sends).

A rule's check is read as a tree. A ternary or a disjunction whose branches the decided fields and the call, state
and history settle is followed into the branch that must hold (`response.status == "error" ? response.id == "" :
...` under an error needs `response.id == ""`); every part of a conjunction must hold; a part nothing settles says
nothing. Each part that must hold gives values: an equality with a response field as one whole side whose other side
evaluates (rules/equations.py: sums and times solved too), a field that must be true (`response.deleted`) or false,
and a text whose shape a `matches` pattern fixes (rules/patterns.py, drawn from a seed so a call always gets the same
one). Values found let more evaluate (`url == base + response.id` once the id is drawn), so the search runs again
until nothing new turns up. Generation writes these into their slots, as it writes the outcome."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from wmstudio.world.checks.report import check_variables
from wmstudio.world.history import HistoryStep
from wmstudio.world.rules.budget import OverBudget, SharedOverBudget, side_budget
from wmstudio.world.rules.cel import evaluate_value, parsed_check, rules_for_tool
from wmstudio.world.rules.equations import implied_values
from wmstudio.world.rules.patterns import nearest_match, regex_literal
from wmstudio.world.rules.references import STRING_LITERAL
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.tools.linear_patterns import search

FIXING_SHARE = 0.25  # of a served request's check budget, an account of its own within it: the fields rules fix
ROUNDS = 3  # searches over the rules: a value found may let another evaluate (an id, then the url built from it)
MAX_ELEMENTS = 32  # elements of a list an `all` rule is read for: a rule over a long list stays cheap
_FIELD = re.compile(r"^\s*(!?)\s*response\.([A-Za-z_]\w*)\s*$")
_SIDE_FIELD = re.compile(r"^\s*(?:timestamp\(\s*)?response\.([A-Za-z_]\w*)\b(?!\s*[.\[(])")
_MATCHES = re.compile(r"^\s*response\.([A-Za-z_]\w*)\.matches\(\s*(" + STRING_LITERAL.pattern + r")\s*\)\s*$")
_PASS_THROUGH = {"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication", "unary",
                 "member", "primary", "paren_expr"}


def fixed_fields(world: WorldSpec, call: Call, decided: dict[str, Any], history: Sequence[HistoryStep] = (),
                 properties: Sequence[str] | None = None, seed: int = 0) -> dict[str, Any]:
    """{field: value} for the top-level response fields the rules of `call`'s tool fix, given `decided` (fields
    already chosen, never changed); only `properties` when given (the response schema's). A text drawn to a
    pattern's shape depends on the call, how many steps came before it and `seed`. Empty when the rules fix nothing
    or are too slow to read within the request's budget."""
    known = dict(decided)
    found: dict[str, Any] = {}
    checks = [rule.check for rule in rules_for_tool(world.rules, call.name) if rule.check]
    if not checks:
        return found
    try:
        with side_budget(FIXING_SHARE, "fixing"):
            for _ in range(ROUNDS):
                fresh = _one_round(checks, world, call, known, history, properties, f"{len(history)}|{seed}")
                if not fresh:
                    break
                found.update(fresh)
                known.update(fresh)
    except (SharedOverBudget, OverBudget):
        return found
    return found


def must_hold(check: str, variables: dict[str, Any]) -> list[str]:
    """The parts of `check` (their text) that must hold given `variables`: ternaries and disjunctions are
    followed where what is known decides them; [] for a check that cannot be read or holds whatever follows."""
    return [_source(part, check) or "" for part in _must_hold_parts(check, variables)]


def _one_round(checks: list[str], world: WorldSpec, call: Call, known: dict[str, Any],
               history: Sequence[HistoryStep], properties: Sequence[str] | None, salt: str) -> dict[str, Any]:
    """The fields the checks fix that `known` does not hold yet; a field two parts fix differently is left out."""
    variables = check_variables(world, call, known, history)
    fresh: dict[str, Any] = {}
    clashing: set[str] = set()
    for check in checks:
        for part in _must_hold_parts(check, variables):
            for name, value in _part_values(part, check, variables, call, salt):
                if name in known or (properties is not None and name not in properties):
                    continue
                if name in fresh and (fresh[name] != value or type(fresh[name]) is not type(value)):
                    clashing.add(name)
                fresh.setdefault(name, value)
    return {name: value for name, value in fresh.items() if name not in clashing}


def _must_hold_parts(check: str, variables: dict[str, Any]) -> list[Any]:
    """must_hold's parts as parse-tree nodes (their sides and macros are read from the tree)."""
    tree = _tree(check)
    return [] if tree is None else _walk(tree, check, variables)


def _walk(node: Any, text: str, variables: dict[str, Any]) -> list[Any]:
    """The nodes under `node` that must hold, following what `variables` settle (must_hold)."""
    kind = getattr(node, "data", None)
    children = _children(node)
    if kind == "expr" and len(children) == 3:  # cond ? then : else
        decided = _truth(_source(children[0], text), variables)
        if decided is None:  # not settled yet (or a bare true/false, which the parser gives no place)
            return []
        return _walk(children[1] if decided else children[2], text, variables)
    if kind == "conditionalor" and len(children) == 2:
        options = _flattened(node, "conditionalor")
        truths = [_truth(_source(option, text), variables) for option in options]
        if any(truth is True for truth in truths):
            return []
        open_options = [option for option, truth in zip(options, truths) if truth is None]
        return _walk(open_options[0], text, variables) if len(open_options) == 1 else []
    if kind == "conditionaland" and len(children) == 2:
        return [part for each in _flattened(node, "conditionaland") for part in _walk(each, text, variables)]
    if kind in _PASS_THROUGH and len(children) == 1:
        return _walk(children[0], text, variables)
    return [node] if _source(node, text) else []


def _part_values(part: Any, text: str, variables: dict[str, Any], call: Call, salt: str
                 ) -> list[tuple[str, Any]]:
    """(field, value) pairs one part that must hold gives: a lone field (true, or false under `!`), a pattern's
    text when the pattern admits no empty text (an optional token may well be empty), an equality's value for a
    field that is a whole side of it (not one read inside a side: `response.path == "/" ? ... : ...`)."""
    source = _source(part, text) or ""
    if (lone := _FIELD.match(source)) is not None:
        return [(lone.group(2), not lone.group(1))]
    if (shaped := _MATCHES.match(source)) is not None:
        regex = regex_literal(shaped.group(2))
        if regex is None or _admits_empty(regex):
            return []
        drawn = nearest_match(regex, _seed_text(call, shaped.group(1), salt))
        return [(shaped.group(1), drawn)] if drawn else []
    every = _all_macro(part, text)
    if every is not None:
        return _values_for_every(*every, variables, call, salt)
    sides = _equality_sides(part)
    if sides is None:
        return []
    names = {found.group(1) for side in sides if (found := _SIDE_FIELD.match(_source(side, text) or ""))}
    return [(name, value) for name, value in implied_values(source, variables) if name in names]


def _all_macro(node: Any, text: str) -> tuple[str, str, str] | None:
    """(list, variable, body) when `node` is `LIST.all(v, BODY)` (through the one-child wrappers), else None."""
    while getattr(node, "data", None) in _PASS_THROUGH and len(_children(node)) == 1:
        node = _children(node)[0]
    if getattr(node, "data", None) != "member_dot_arg" or "all" not in [str(c) for c in node.children
                                                                        if not hasattr(c, "data")]:
        return None
    receiver, arguments = (_children(node) + [None, None])[:2]
    pieces = _children(arguments) if arguments is not None else []
    texts = [_source(piece, text) for piece in [receiver, *pieces]] if receiver is not None else []
    if len(texts) != 3 or not all(texts) or not re.fullmatch(r"[A-Za-z_]\w*", texts[1].strip()):
        return None
    return texts[0], texts[1].strip(), texts[2]


def _values_for_every(receiver: str, variable: str, body: str, variables: dict[str, Any], call: Call,
                      salt: str) -> list[tuple[str, Any]]:
    """What `LIST.all(v, BODY)` fixes: BODY read with each element in turn written for `v` (at most MAX_ELEMENTS);
    a field is fixed where every element fixes it alike (`state.orders.filter(o, o.id == call.arguments.id)
    .all(o, o.total == response.total)`: the named order's total). An empty list fixes nothing."""
    try:
        count = evaluate_value(f"size({receiver})", variables)
    except ValueError:
        return []
    if not isinstance(count, int) or not 0 < count <= MAX_ELEMENTS:
        return []
    found: dict[str, list[Any]] = {}
    for index in range(count):
        element = re.sub(rf"(?<![\w.]){variable}(?=\s*[.\[])", lambda _: f"({receiver})[{index}]", body)
        for part in _must_hold_parts(element, variables):
            for name, value in _part_values(part, element, variables, call, salt):
                found.setdefault(name, []).append(value)
    return [(name, values[0]) for name, values in found.items()
            if len(values) == count and all(v == values[0] and type(v) is type(values[0]) for v in values)]


def _equality_sides(node: Any) -> list[Any] | None:
    """The two sides of `node` when it is an equality `A == B` (through the tree's one-child wrappers), else None:
    the parser writes it as a relation whose first child holds `A ==` and whose second holds `B`."""
    while True:
        children = _children(node)
        if getattr(node, "data", None) == "relation" and len(children) == 2:
            return children if getattr(children[0], "data", None) == "relation_eq" else None
        if getattr(node, "data", None) not in _PASS_THROUGH or len(children) != 1:
            return None
        node = children[0]


def _flattened(node: Any, kind: str) -> list[Any]:
    """The operands of a chain of one left-nested operator (`a || b || c`), in order."""
    children = _children(node)
    if getattr(node, "data", None) != kind or len(children) != 2:
        return [node]
    return [*_flattened(children[0], kind), children[1]]


def _children(node: Any) -> list[Any]:
    """A tree node's child nodes (its tokens left out)."""
    return [child for child in getattr(node, "children", []) if hasattr(child, "data")]


def _truth(expression: str | None, variables: dict[str, Any]) -> bool | None:
    """True or False when `expression` evaluates to a truth value on what is known, None when it cannot yet."""
    if not expression:
        return None
    try:
        value = evaluate_value(expression, variables)
    except ValueError:
        return None
    return value if isinstance(value, bool) else None


def _admits_empty(regex: str) -> bool:
    return search(regex, "") is not False  # a pattern RE2 cannot run: nothing drawn from it


def _seed_text(call: Call, name: str, salt: str) -> str:
    """Characters to draw a pattern's text from: a digest of the call, the field and `salt`, so a call always gets
    the same text and two calls (or one call twice in a session, a second login) get different ones."""
    digest = hashlib.sha256(f"{call.name}|{json.dumps(call.arguments, sort_keys=True, default=str)}|{name}|{salt}"
                            .encode()).hexdigest()
    return digest + digest.upper()


def _source(node: Any, text: str) -> str | None:
    """The text of `node`, None where the parser kept no place for it (a `true` or `false` literal)."""
    start, end = getattr(node.meta, "start_pos", None), getattr(node.meta, "end_pos", None)
    return text[start:end] if start is not None and end is not None else None


def _tree(check: str) -> Any:
    """The parsed check (the rules' own compiled tree, so its parsing counts against the request's budget once),
    None when it does not parse."""
    try:
        return parsed_check(check)
    except Exception:  # noqa: BLE001 - a check that does not parse fixes nothing (the checks report it)
        return None
