"""The outcome head: a response's status and error code, chosen from the call and the state before denoising.

Whether a call succeeds turns on lookups, a record's flags, a date's age and comparisons of numbers
(world/heads/outcome_features.py names them). The 1.6M-parameter denoiser learns the response's form and copies its
values, but decides ok / error from those facts only a little better than a lookup table; a linear scorer over the
named facts, crossed with the tool and hashed (the hashing trick), learns them from the training corpus in two
minutes. Its choice is written into the canvas's own status and error slots before denoising (the layout the model was
trained on, not an anchor's text in place of the slots), so the denoiser writes the rest under it (an error's
message, a refund's empty fields). A tool is known by its name and its response's top-level keys (a same-named
tool of another world is another tool). Beside the per-tool scorer, a generic one scores ok / error from the facts
with the tool's own names taken out (`arg:*:missing`, `invalid_arg:*:type`): a tool it never saw gets its status
from that, and its error code from the canvas. Weights live beside the checkpoint in `outcome_head.safetensors`
(float16), the tools it knows and their outcomes in `outcome_head.json`."""

from __future__ import annotations

import json
import math
import re
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from wmstudio.model.canvas.canvas import OUTCOME_KEY, OUTCOME_VALUES
from wmstudio.world.checks.decided import CODE, refusing_rule
from wmstudio.world.checks.error_codes import allowed_codes, code_rules, outage_code
from wmstudio.world.checks.explained_codes import explains
from wmstudio.world.checks.unfound import missing_code
from wmstudio.world.grounding import NONE, Grounding
from wmstudio.world.heads.outcome_features import DIRECTIVE, outcome_features
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.anchors import Anchor
from wmstudio.world.tools.linear_patterns import validator_for

HEAD_FILE, CONFIG_FILE = "outcome_head.safetensors", "outcome_head.json"
MESSAGE_KEY = "message"  # the top-level text saying what happened, written to the outcome
ERROR_KEY = "error"  # the top-level field that names what went wrong (`ORDER_NOT_FOUND`), "" when nothing did
BUCKETS = 1 << 18  # hashed (fact, tool, outcome) weights: 512 KB in float16
EPOCHS, LEARNING_RATE, L2 = 300, 0.05, 1e-5  # full-batch Adam; measured on 16k rows: 97% status, 96% code held out


@dataclass(frozen=True)
class Outcome:
    """The head's choice for one call: its status, its error code ("" for none) and how likely it found it."""

    status: str
    error: str | None  # None: the head chose only the status (a tool it never saw); the canvas writes the code
    probability: float
    message: str | None = None  # the message written to this outcome (model/heads/outcome_messages.py), None: the canvas's

    def values(self, schema: dict[str, Any] | None) -> dict[str, str]:
        """The choice as top-level values of a response `schema`: the status where the schema offers it, the error
        code where the schema has a top-level string `error` that admits it; none on a schema without a status."""
        properties = (schema or {}).get("properties") or {}
        if not _admits(properties.get(OUTCOME_KEY), self.status):
            return {}
        chosen = {OUTCOME_KEY: self.status}
        if self.error is not None and _admits(properties.get(ERROR_KEY), self.error):
            chosen[ERROR_KEY] = self.error
        elif self.error is None and self.status == "ok" and _admits(properties.get(ERROR_KEY), ""):
            chosen[ERROR_KEY] = ""  # an ok answer states no error code, whoever chose the status
        if self.message is not None and _admits(properties.get(MESSAGE_KEY), self.message):
            chosen[MESSAGE_KEY] = self.message
        return chosen

    def anchors(self, schema: dict[str, Any] | None) -> list[Anchor]:
        """`values` as anchors (what repair holds while it remasks other fields)."""
        return [Anchor(path, value) for path, value in self.values(schema).items()]

    def to_json(self) -> dict[str, Any]:
        shown = {"status": self.status, "error": self.error, "probability": round(self.probability, 4)}
        return {**shown, "message": self.message} if self.message is not None else shown

    def __str__(self) -> str:
        code = f" {self.error}" if self.error else ""
        return f"{self.status}{code} (p {self.probability:.2f})"


def outcome_of(response: Any) -> tuple[str, str] | None:
    """(status, error code) of a response value whose top-level status is ok or error, else None."""
    if not isinstance(response, dict) or response.get(OUTCOME_KEY) not in OUTCOME_VALUES:
        return None
    code = response.get(ERROR_KEY, "")
    return response[OUTCOME_KEY], code if isinstance(code, str) else ""


class OutcomeHead:
    """A hashed linear scorer: the score of outcome c for a call is the sum of the weights of (fact, tool, c) over
    the call's facts; the outcomes offered are those the tool (tool_key: its name and response keys) answered with
    in training. `generic` says whether it also has the tool-free status scorer."""

    def __init__(self, weights: torch.Tensor, outcomes: dict[str, list[tuple[str, str]]], generic: bool = False
                 ) -> None:
        self.weights = weights.float()
        self.outcomes = outcomes
        self.generic = generic

    def predict(self, world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                schema: dict[str, Any] | None = None, grounding: Grounding = NONE) -> Outcome | None:
        """The likeliest outcome of `call`, or None where the head abstains (a tool it was not fitted on, without
        the generic scorer or a status in `schema`)."""
        ranked = self.distribution(world, call, history, schema, grounding)
        return ranked[0] if ranked else None

    def distribution(self, world: WorldSpec, call: Call, history: Sequence[HistoryStep] = (),
                     schema: dict[str, Any] | None = None, grounding: Grounding = NONE) -> list[Outcome]:
        """Every outcome the tool answered with in training, with its probability for `call`, likeliest first; for
        a tool it never saw, ok and error from the generic scorer (no code) when `schema` offers both; empty where
        `predict` abstains. Its facts read the state the prompt shows under `grounding`."""
        schema = schema if schema is not None else _response_schema(world, call)
        key = tool_key(call.name, schema)
        choices = self.outcomes.get(key)
        facts = outcome_features(world, call, history, grounding)
        if not choices:
            status = ((schema or {}).get("properties") or {}).get(OUTCOME_KEY)
            if not self.generic or not all(_admits(status, value) for value in OUTCOME_VALUES):
                return []
            general = generic_facts(facts, call.name)
            scores = torch.stack([self.weights[torch.tensor(generic_buckets(general, value))].sum()
                                  for value in OUTCOME_VALUES])
            pairs = zip(OUTCOME_VALUES, torch.softmax(scores, dim=0).tolist())
            return [Outcome(value, None, p) for value, p in sorted(pairs, key=lambda pair: -pair[1])]
        scores = torch.stack([self.weights[torch.tensor(fact_buckets(facts, key, c))].sum() for c in choices])
        probabilities = torch.softmax(scores, dim=0).tolist()
        ranked = sorted(zip(choices, probabilities), key=lambda pair: -pair[1])
        return [Outcome(status, error, probability) for (status, error), probability in ranked]

    @classmethod
    def fit(cls, rows: Sequence[tuple[WorldSpec, Call, Sequence[HistoryStep], Any, str]], epochs: int = EPOCHS,
            learning_rate: float = LEARNING_RATE, seed: int = 0) -> tuple["OutcomeHead", dict[str, Any]]:
        """Fit on (world, call, history, true response value, grounding) rows; rows without an ok / error status
        are skipped. The per-tool scorer and the generic status scorer share one hashed table.
        Returns the head and what the fit saw (rows, tools, outcomes, training accuracy)."""
        torch.manual_seed(seed)
        labelled = []
        seen: dict[str, Counter] = {}
        for world, call, history, response, grounding in rows:
            outcome = outcome_of(response)
            if outcome is None:
                continue
            key = tool_key(call.name, _response_schema(world, call))
            seen.setdefault(key, Counter())[outcome] += 1
            labelled.append((key, call.name, outcome_features(world, call, history, grounding), outcome))
        outcomes = {tool: sorted(counts) for tool, counts in seen.items()}
        if not labelled:
            return cls(torch.zeros(BUCKETS), outcomes), {"rows": 0, "tools": 0, "train_accuracy": None}
        width = max(len(choices) for choices in outcomes.values())
        tool_rows = [([fact_buckets(facts, key, choice) for choice in outcomes[key]], outcomes[key].index(outcome))
                     for key, _, facts, outcome in labelled]
        status_rows = [([generic_buckets(generic_facts(facts, name), value) for value in OUTCOME_VALUES],
                        OUTCOME_VALUES.index(outcome[0])) for _, name, facts, outcome in labelled]
        scorer = torch.nn.EmbeddingBag(BUCKETS, 1, mode="sum")
        torch.nn.init.zeros_(scorer.weight)
        optimizer = torch.optim.Adam(scorer.parameters(), lr=learning_rate)
        batches = [_packed(tool_rows, width), _packed(status_rows, len(OUTCOME_VALUES))]
        for _ in range(epochs):
            optimizer.zero_grad()
            loss = L2 * scorer.weight.pow(2).sum()
            for index, start, mask, target, columns in batches:
                scores = scorer(index, start).view(-1, columns).masked_fill(~mask, -math.inf)
                loss = loss + torch.nn.functional.cross_entropy(scores, target)
            loss.backward()
            optimizer.step()
        with torch.no_grad():
            index, start, mask, target, columns = batches[0]
            scores = scorer(index, start).view(-1, columns).masked_fill(~mask, -math.inf)
            accuracy = float((scores.argmax(1) == target).float().mean())
        head = cls(scorer.weight.detach().squeeze(1).half(), outcomes, generic=True)
        return head, {"rows": len(labelled), "tools": len(outcomes), "outcomes": sum(map(len, outcomes.values())),
                      "train_accuracy": round(accuracy, 4), "loss": round(loss.item(), 4)}

    def save(self, folder: Path, fitted: dict[str, Any] | None = None) -> None:
        """Write the weights (float16) and the tools' outcomes beside a checkpoint in `folder`."""
        from safetensors.torch import save_file

        folder = Path(folder)
        save_file({"weights": self.weights.half().contiguous()}, str(folder / HEAD_FILE))
        config = {"buckets": BUCKETS, "version": 2, "generic": self.generic,
                  "outcomes": {tool: [list(c) for c in choices] for tool, choices in sorted(self.outcomes.items())},
                  "fitted": fitted or {}}
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=1) + "\n", encoding="utf-8")


def tool_key(name: str, schema: dict[str, Any] | None) -> str:
    """A tool as the head knows it: its name and its response's top-level keys (`get_order#error,items,...`)."""
    keys = sorted(((schema or {}).get("properties") or {}) if isinstance(schema, dict) else {})
    return f"{name}#{','.join(keys)}"


def fact_buckets(facts: Sequence[str], tool: str, outcome: tuple[str, str]) -> list[int]:
    """The hashed weight ids of `facts` for `tool` (a tool_key) and `outcome`: each fact crossed with the tool (a
    flag means something else to another tool), directive words also alone (a directive steers every tool alike)."""
    label = f"{outcome[0]}:{outcome[1]}"
    keys = [f"{tool}|{fact}|{label}" for fact in facts]
    keys += [f"{fact}|{label}" for fact in facts if fact.startswith(DIRECTIVE)]
    return [zlib.crc32(key.encode()) % BUCKETS for key in keys]


GENERIC = [  # (pattern over a fact, its tool-free form): the world's own names (arguments, fields, tools) out
    (re.compile(r"^arg:[^:]+:(found|missing|parent_found|parent_missing|empty|text|positive|negative|zero|held"
                r"|unheld|cursor)$"), r"arg:\1"),
    (re.compile(r"^arg:[^:]+:date(:.*)?$"), r"arg:date\1"),
    (re.compile(r"^arg:[^:]+:at:.*$"), "arg:at"),
    (re.compile(r"^arg:[^:]+:(record|answered)\.[^:=]+==.*$"), r"\1.equal"),
    (re.compile(r"^arg:[^:]+(==|~)state:.*$"), r"arg\1state"),
    (re.compile(r"^arg:[^:]+:(record|answered)\.[^:=]+=(.*)$"), r"\1=\2"),
    (re.compile(r"^arg:[^:]+:(record|answered)\.[^:]+:(past|future|age<=\d+)$"), r"\1.date:\2"),
    (re.compile(r"^arg:[^:]+:(record|answered)\.[^:]+:(positive|negative|zero)$"), r"\1.number:\2"),
    (re.compile(r"^arg:[^:]+:(record|answered)\.[^:]+:items(\d)$"), r"\1.list:\2"),
    (re.compile(r"^arg:[^:]+:(record|answered):[^<>=]+(>|==|<)[^-]+$"), r"\1:arg\2field"),
    (re.compile(r"^arg:[^:]+:(record|answered):[^<>=]+>[^-]+-.+$"), r"\1:arg>difference"),
    (re.compile(r"^arg:[^:<>=]+(>|<=)[^:]+$"), r"arg\1state"),
    (re.compile(r"^arg:[^:=]+=(.*)$"), r"arg=\1"),
    (re.compile(r"^(missing_arg|extra_arg):.*$"), r"\1"),
    (re.compile(r"^invalid_arg:.*:([^:]+)$"), r"invalid_arg:\1"),
    (re.compile(r"^(history|answered):.*:([^:]*)$"), r"\1:\2"),
    (re.compile(r"^(bias|unknown_tool|turns:\d+|rule:.*)$"), r"\1"),
]


VERB_FAMILIES = {  # a tool name's leading verb -> what kind of call it is, the same for any API
    "read": ("get", "fetch", "find", "lookup", "look", "read", "show", "retrieve", "describe", "view", "check",
             "track", "list", "search", "query", "browse", "count", "stat", "status"),
    "create": ("create", "add", "new", "book", "open", "register", "make", "post", "insert", "issue", "start",
               "submit", "place", "upload", "write", "mkdir", "copy", "login", "authenticate", "sign"),
    "update": ("update", "set", "change", "edit", "modify", "rename", "patch", "move", "assign", "allocate",
               "approve", "confirm", "transfer", "refund", "pay", "charge", "apply", "reserve", "extend"),
    "delete": ("delete", "remove", "cancel", "close", "drop", "archive", "revoke", "void", "release"),
}
_VERB = {verb: family for family, verbs in VERB_FAMILIES.items() for verb in verbs}
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")


def tool_family(name: str) -> str:
    """`read`, `create`, `update`, `delete` or `action`: the family of a tool name's first word (getOrder,
    fetch_purchase, cancel-booking), so a fact can mean one thing for a lookup and another for a create."""
    words = [word.lower() for word in _WORD.findall(name)]
    return _VERB.get(words[0], "action") if words else "action"


def generic_facts(facts: Sequence[str], tool: str = "") -> list[str]:
    """The facts with the world's own names taken out (argument paths, record fields, tool names), so they mean the
    same for any tool: `arg:order_id:missing` -> `arg:missing`, `history:id:get_x:ok` -> `history:ok`; directive
    words are kept as they are; an argument the state lacks but an earlier response gave reads
    `arg:missing_answered`. With `tool`, each argument fact also crossed with the tool's family (`read&arg:missing`: an id a
    lookup cannot find, unlike a create's new one)."""
    found = []
    answered = {fact.split(":")[1] for fact in facts if fact.startswith("answered:")}
    for fact in facts:
        if fact.startswith(DIRECTIVE):
            found.append(fact)
            continue
        parts = fact.split(":")
        if len(parts) == 3 and parts[0] == "arg" and parts[2] == "missing" and parts[1] in answered:
            found.append("arg:missing_answered")  # not in the state, but an earlier response gave it (a token)
            continue
        for pattern, form in GENERIC:
            if pattern.match(fact):
                found.append(pattern.sub(form, fact))
                break
    if tool:
        family = tool_family(tool)
        found += [f"{family}&{fact}" for fact in found if fact.startswith("arg")]
    return list(dict.fromkeys(found))


def generic_buckets(facts: Sequence[str], status: str) -> list[int]:
    """The hashed weight ids of the generic scorer: each tool-free fact crossed with a status only."""
    return [zlib.crc32(f"*|{fact}|{status}".encode()) % BUCKETS for fact in facts]


def _packed(rows: list[tuple[list[list[int]], int]], columns: int):
    """EmbeddingBag inputs for rows of (buckets per choice, target): flat ids, offsets, the real-choice mask."""
    buckets, offsets, allowed, targets = [], [], [], []
    for choices, target in rows:
        for k in range(columns):
            offsets.append(len(buckets))
            if k < len(choices):
                buckets += choices[k]
        allowed.append([k < len(choices) for k in range(columns)])
        targets.append(target)
    return torch.tensor(buckets), torch.tensor(offsets), torch.tensor(allowed), torch.tensor(targets), columns


def within_pins(ranked: Sequence[Outcome], pinned: Sequence[Anchor], world: WorldSpec, call: Call,
                history: Sequence[HistoryStep], schema: dict[str, Any] | None) -> list[Outcome]:
    """The outcomes of `ranked` the user's pins allow, their probabilities renormalised: all without a pin; with the
    status pinned, those of that status; with status "error" pinned on a schema with an error code, those whose
    code's cause (a rule of the world) holds for the call, the state and the history, else (no stated cause holds)
    the world's outage code (or another failure with no cause the world can explain: a rate limit, a sign-in failure
    only where it has a sign-in; world/checks/explained_codes.py); none when the code itself is pinned (the user's steering is whole)."""
    if any(anchor.path == ERROR_KEY for anchor in pinned):
        return []
    status = next((anchor.value for anchor in pinned if anchor.path == OUTCOME_KEY), None)
    if status is None:
        return list(ranked)
    kept = [outcome for outcome in ranked if outcome.status == status]
    if status == "error" and ERROR_KEY in ((schema or {}).get("properties") or {}):
        holding = allowed_codes(world, call, {OUTCOME_KEY: "error"}, history)
        if holding:
            kept = [o for o in kept if o.error in holding] or [Outcome("error", holding[0], 1.0)]
        else:  # no stated cause holds: a failure with no cause in the state, one the world can explain
            stated, outage = set(code_rules(world)), outage_code(world)
            kept = [o for o in kept if o.error and o.error not in stated and explains(world, o.error)] or \
                ([Outcome("error", outage, 1.0)] if outage else [])
    total = sum(outcome.probability for outcome in kept)
    return [Outcome(o.status, o.error, o.probability / total if total > 0 else 1.0 / len(kept)) for o in kept]


def with_stated_codes(ranked: Sequence[Outcome], world: WorldSpec, call: Call, history: Sequence[HistoryStep],
                      schema: dict[str, Any] | None) -> list[Outcome]:
    """`ranked` with each error outcome that has no code (the generic scorer's, for a tool the head never saw)
    given the first code whose cause, as the world's rules state it, holds for the call, the state and the history,
    else the not-found code its tool states where the call names nothing the world holds, else the world's outage
    code; as a pinned error gets its code (`within_pins`). Without it the denoiser wrote
    codes no rule names (`INVALID_NOT_NOT_`) or none."""
    if not any(o.status == "error" and o.error is None for o in ranked) or \
            ERROR_KEY not in ((schema or {}).get("properties") or {}):
        return list(ranked)
    holding = allowed_codes(world, call, {OUTCOME_KEY: "error"}, history)
    code = holding[0] if holding else missing_code(world, call, history) or outage_code(world)
    if not code:
        return list(ranked)
    return [replace(o, error=code) if o.status == "error" and o.error is None else o for o in ranked]


def within_rules(ranked: Sequence[Outcome], world: WorldSpec, call: Call, history: Sequence[HistoryStep],
                 schema: dict[str, Any] | None, known: dict[str, Any] | None = None,
                 done: dict[str, Any] | None = None) -> list[Outcome]:
    """`ranked` without the outcomes a world's rule refuses before any other field is written
    (world/checks/decided.py), with the outcome's fields and `known` (what generation writes whatever the outcome:
    the identifiers the call sends) decided, and for an ok outcome `done` (what an ok write states: a running total
    a rule holds below the order's): an ok the state's record forbids (an order not pending, cancelled ok) gives
    way to the error the head ranks next. An error without a code, left after a refused ok, takes the code that
    rule names when it names one (`needs in_review (else INVALID_STATE)`), else the errors whose stated cause holds
    come first. Nothing left: `ranked` as it was."""
    kept, named, refused = [], set(), False
    for outcome in ranked:
        ok_values = (done or {}) if outcome.status != "error" else {}
        rule = refusing_rule(world, call, {**ok_values, **(known or {}), **outcome.values(schema)}, history)
        if rule is None:
            kept.append(outcome)
        elif outcome.status != "error":
            named |= set(re.findall(CODE, rule.text))
            refused = True
    if not kept:
        return list(ranked)
    if ERROR_KEY not in ((schema or {}).get("properties") or {}):
        return kept
    if len(named) == 1:
        return [replace(o, error=next(iter(named))) if o.status == "error" and o.error is None else o for o in kept]
    if refused and all(o.status == "error" for o in kept):
        return _caused_first(kept, allowed_codes(world, call, {OUTCOME_KEY: "error"}, history))
    return kept


def _caused_first(kept: list[Outcome], holding: Sequence[str]) -> list[Outcome]:
    """Errors left after a refused ok, those whose code's stated cause holds first (an amount over what is left
    answers AMOUNT_EXCEEDS_REFUNDABLE, not the head's next guess, a rate limit); that cause's code when none of them
    has it."""
    if not holding:
        return kept
    caused = [o for o in kept if o.error in holding]
    if not caused:
        bare = next((o for o in kept if not o.error), None)  # the head's codeless error takes the cause's code
        caused = [replace(bare, error=holding[0]) if bare else Outcome("error", holding[0], kept[0].probability)]
        kept = [o for o in kept if o is not bare]
    return caused + [o for o in kept if o not in caused]


def load_outcome_head(folder: Path) -> OutcomeHead | None:
    """The head saved beside a checkpoint, or None when the folder has none (or one of another size)."""
    folder = Path(folder)
    if not (folder / HEAD_FILE).exists() or not (folder / CONFIG_FILE).exists():
        return None
    from safetensors.torch import load_file

    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    if config.get("buckets") != BUCKETS or config.get("version") != 2:  # an older head hashed tools by name alone
        return None
    outcomes = {tool: [(str(s), str(e)) for s, e in choices] for tool, choices in config["outcomes"].items()}
    return OutcomeHead(load_file(str(folder / HEAD_FILE))["weights"], outcomes, bool(config.get("generic")))


def _response_schema(world: WorldSpec, call: Call) -> dict[str, Any] | None:
    try:
        return world.tool(call.name).response
    except KeyError:
        return None


def _admits(schema: Any, value: str) -> bool:
    """Whether a property's `schema` accepts `value` (a missing property accepts nothing)."""
    if not isinstance(schema, dict):
        return False
    try:
        return validator_for(schema)(schema).is_valid(value)
    except Exception:  # noqa: BLE001 - a schema the validator cannot apply is one we do not pin into
        return False
