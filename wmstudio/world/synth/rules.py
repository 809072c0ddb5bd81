"""The domain rules of a synthetic world, in words for the prompt and in CEL for `check`, one rule per tool.

A check sees the *initial* state, the call, the response and the history; what the state says about a record is
compared only while no earlier call in the history changed anything (`untouched`), and fields no tool ever changes
(a record's owner, price, name) are compared always. The simulator obeys every rule: tests/test_synth.py runs them
on many random calls."""

from __future__ import annotations

import json
from collections.abc import Callable

from wmstudio.world.rules.cel import Rule
from wmstudio.world.synth import formulas
from wmstudio.world.synth.blueprint import Blueprint, Entity, ToolPlan
from wmstudio.world.synth.naming import RFC3339_PATTERN, period_text, slug

SCALARS = ("label", "person", "email", "phone", "code", "int", "money", "enum", "bool", "time", "ref")


def world_rules(bp: Blueprint) -> list[Rule]:
    """The outcome rule, one rule per tool (what it answers and when it refuses), and the session rule."""
    codes = bp.codes
    texts = [plan.name for plan in bp.tools if plan.family == "text"]
    skip = f"call.name in [{', '.join(map(_q, texts))}] || " if texts else ""  # text has no status to read
    rules = [Rule(f"A failed call answers status \"error\" and its code (a missing argument {codes['missing']}, a "
                  f"malformed one {codes['invalid']}, an unknown tool {codes['unknown_tool']}); otherwise error is "
                  '""',
                  f'{skip}(response.status == "error") == (response.error != "")')]
    for plan in bp.tools:
        parts = RULES[plan.family](bp, plan)
        if parts:
            text = f"{plan.name}: " + "; ".join(t for t, _ in parts)
            check = " && ".join(f"({c})" for _, c in parts)
            guard = "" if plan.family in ("create", "delete", "batch", "login") else ' || response.status == "error"'
            rules.append(Rule(text, f"call.name != {_q(plan.name)}{guard} ? true : {check}"))
    if bp.login is not None:
        auth = bp.login
        rules.append(Rule(
            f"Every tool but {auth['tool']} needs the {auth['token_key']} of an earlier successful {auth['tool']} as "
            f"its {auth['session']} (none: {codes['no_auth']}, unknown: {codes['bad_token']}, expired: "
            f"{codes['expired']})",
            f'{skip}call.name == {_q(auth["tool"])} || response.status == "error" ? true : '
            f'has(call.arguments.{auth["session"]}) && history.filter(h, h.call.name == {_q(auth["tool"])}).exists('
            f'h, h.response.status == "ok" && h.response.{auth["token_key"]} == call.arguments.{auth["session"]})'))
    return rules


def _q(text: str) -> str:
    return json.dumps(text)


def changed(bp: Blueprint) -> str:
    """CEL: true once an earlier call in the history may have changed the state (until then it is the initial
    state, which a check can read)."""
    names = ", ".join(_q(name) for name in bp.mutating())
    return f'history.exists(h, h.response.status != "error" && h.call.name in [{names}])'


def each_record(entity: Entity, id_expr: str, condition: Callable[[str], str]) -> str:
    """CEL: `condition` holds for the initial state's record with id `id_expr` (true when there is none)."""
    if entity.storage == "map":
        return f"(!({id_expr} in state.{entity.store}) || {condition(f'state.{entity.store}[{id_expr}]')})"
    return f"state.{entity.store}.filter(r, r.{entity.id_key} == {id_expr}).all(r, {condition('r')})"


def get_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    at = f"response.{plan.nested}." if plan.nested else "response."
    fixed = [k for k in plan.view if k in entity.immutable and entity.field(k).kind in SCALARS][:3]
    parts = []
    if fixed:
        parts.append((f"shows the stored {', '.join(entity.field(k).words for k in fixed)}",
                      each_record(entity, f"call.arguments.{plan.params['id']}",
                                  lambda r: " && ".join(f"{r}.{k} == {at}{k}" for k in fixed))))
    for key, ref, target_field in plan.joins:
        target = bp.entities[entity.field(ref).target]
        parts.append((f"{key} is the {target.field(target_field).words} of the {target.name} its {ref} names",
                      f"{changed(bp)} || "
                      f"{each_record(target, at + ref, lambda t: f'{t}.{target_field} == {at}{key}')}"))
    return parts


def search_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    out = plan.out
    items, more, after = f"response.{out['items']}", f"response.{out['more']}", f"response.{out['next']}"

    def matches(r: str) -> str:
        return " && ".join(f"(!has(call.arguments.{p}) || {r}.{k} == call.arguments.{p})" for p, k in plan.filters) \
            or "true"

    parts = []
    if plan.filters:
        parts.append(("lists only matching " + entity.plural, f"{items}.all(r, {matches('r')})"))
    parts.append((f"at most {plan.max_limit} a page; {out['more']} is true exactly when {out['next']} is given",
                  f"size({items}) <= {plan.max_limit} && {more} == ({after} != \"\")"))
    if "total" in out:
        total = f"response.{out['total']}"
        if entity.storage == "map":
            counted = f"size(state.{entity.store}.filter(k, {matches(f'state.{entity.store}[k]')}))"
        else:
            counted = f"size(state.{entity.store}.filter(r, {matches('r')}))"
        skip = f"has(call.arguments.{plan.contains[0]}) || " if plan.contains[0] else ""
        parts.append((f"{out['total']} counts every match over all pages",
                      f"{total} >= size({items}) && ({skip}{total} == 0 || {changed(bp)} || {total} == {counted})"))
    return parts


def create_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    out, p = plan.out, plan.params
    new_id = f"response.{out['id']}"
    ok = [f"{new_id}.matches({_q(entity.ids.pattern())})", f"response.{out['label']} == call.arguments.{p['label']}"]
    words = [f"a failed one returns {out['id']} \"\"; the new {entity.name} keeps its {p['label']}"]
    if "link" in out:
        if plan.link.startswith("https://"):
            ok.append(f"response.{out['link']} == {_q(plan.link)} + {new_id}")
            words.append(f"{out['link']} is {plan.link}<id>")
        else:
            ok.append(f"response.{out['link']} == {_q(plan.link)} + call.arguments.{p['owner']} + "
                      f"{_q('/' + slug(entity.plural) + '/')} + {new_id}")
            words.append(f"{out['link']} is {plan.link}<{p['owner']}>/{slug(entity.plural)}/<id>")
    if "due" in out:
        ok.append(f"timestamp(response.{out['due']}) - timestamp(state.{bp.now_key}) == duration(\"{plan.period}s\")")
        words.append(f"{out['due']} is {period_text(plan.period)} after now")
    if "total" in out:
        amount = f"(has(call.arguments.{p['quantity']}) ? call.arguments.{p['quantity']} : 0)"
        ok.append(f"response.{out['total']} == {formulas.cel(plan.formula, amount, 'call.arguments.' + p['price'])}")
        words.append(f"{out['total']} = {formulas.words(plan.formula, p['quantity'], p['price'])}")
    check = f"response.status == \"error\" ? {new_id} == \"\" : " + " && ".join(ok)
    return [("; ".join(words), check)]


def update_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    at = f"response.{plan.nested}." if plan.nested else "response."
    echoed = " && ".join(f"(!has(call.arguments.{k}) || {at}{k} == call.arguments.{k})" for k in plan.updatable)
    parts = [(f"answers the {entity.name} with the values given, {plan.out['stamp']} now",
              f"{echoed} && response.{plan.out['stamp']} == state.{bp.now_key}")]
    if entity.lifecycle:
        parts.append((f"{entity.lifecycle[-1]} {entity.plural} are read-only",
                      f"{at}{entity.status} != {_q(entity.lifecycle[-1])}"))
    return parts


def delete_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    out = plan.out
    record_id = f"call.arguments.{plan.params['id']}"
    ok = [f"response.{out['deleted']}",
          f"({changed(bp)} || response.{out['remaining']} == size(state.{entity.store}) - 1)"]
    words = [f"{out['deleted']} only on success; {out['remaining']} counts the {entity.plural} left"]
    for pre in plan.preconditions:
        if pre.kind == "owner":
            owner = f"call.arguments.{plan.params['owner']}"
            ok.append(each_record(entity, record_id, lambda r: f"{r}.{entity.owner} == {owner}"))
            words.append(f"only by its owner (else {pre.code})")
        elif pre.kind == "status":
            allowed = ", ".join(_q(s) for s in pre.statuses)
            held = each_record(entity, record_id, lambda r: f"{r}.{entity.status} in [{allowed}]")
            ok.append(f"({changed(bp)} || {held})")
            words.append(f"only {'/'.join(pre.statuses)} ones (else {pre.code})")
    check = f"response.status == \"error\" ? !response.{out['deleted']} : " + " && ".join(ok)
    return [("; ".join(words), check)]


def action_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    out, p = plan.out, plan.params
    record_id = f"call.arguments.{p['id']}"
    parts = []
    for pre in plan.preconditions:
        if pre.kind == "owner":
            parts.append((f"only the {entity.name}'s {entity.field(entity.owner).words[:-3]} (else {pre.code})",
                          each_record(entity, record_id,
                                      lambda r: f"{r}.{entity.owner} == call.arguments.{p['owner']}")))
        elif pre.kind == "status":
            allowed = ", ".join(_q(s) for s in pre.statuses)
            parts.append((f"needs {'/'.join(pre.statuses)} (else {pre.code}), then {plan.transition[1]}",
                          f"response.{out['status']} == {_q(plan.transition[1])} && ({changed(bp)} || "
                          f"{each_record(entity, record_id, lambda r: f'{r}.{entity.status} in [{allowed}]')})"))
        elif pre.kind == "window":
            when = f"timestamp(call.arguments.{p['when']})"
            now = f"timestamp(state.{bp.now_key})"
            parts.append((f"{p['when']} from now to {period_text(pre.seconds)} later (else {pre.code})",
                          f"{when} >= {now} && {when} <= {now} + duration(\"{pre.seconds}s\")"))
        elif pre.kind == "quantity":
            q = entity.field(entity.quantity)
            remaining = f"response.{out['remaining']}"
            used = f"call.arguments.{p['amount']} * {plan.usage}"
            exact = each_record(entity, record_id, lambda r: f"{remaining} == {r}.{entity.quantity} - {used}")
            parts.append((f"{p['amount']} × {plan.usage} must not exceed {q.words} (else {pre.code}); "
                          f"{out['remaining']} is what is left",
                          f"{remaining} >= 0 && (response.status != \"ok\" || {changed(bp)} || {exact})"))
    if "until" in out:
        parts.append((f"{out['until']} is {period_text(plan.period)} after {p['when']}",
                      f"timestamp(response.{out['until']}) - timestamp(call.arguments.{p['when']}) == "
                      f"duration(\"{plan.period}s\")"))
    if "charged" in out:
        price = f"response.{out['price']}" if "price" in out else None
        amount = f"call.arguments.{p['amount']}"
        if price is not None:
            check = (f"response.status != \"ok\" || "
                     f"response.{out['charged']} == {formulas.cel(plan.formula, amount, price)}")
        else:
            check = "response.status != \"ok\" || " + each_record(
                entity, record_id,
                lambda r: f"response.{out['charged']} == {formulas.cel(plan.formula, amount, f'{r}.{entity.price}')}")
        parts.append((f"{out['charged']} = {formulas.words(plan.formula, p['amount'], entity.price)}", check))
    return parts


def transfer_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    entity = bp.entities[plan.entity]
    out, p = plan.out, plan.params
    moved = f"response.{out['moved']}"
    source = each_record(entity, f"call.arguments.{p['source']}",
                         lambda r: f"response.{out['source_left']} == {r}.{entity.quantity} - {moved}")
    target = each_record(entity, f"call.arguments.{p['target']}",
                         lambda r: f"response.{out['target_now']} == {r}.{entity.quantity} + {moved}")
    return [(f"moves {p['amount']} (half under partial success) between two different {entity.plural}; the source "
             f"must hold it (else {plan.preconditions[0].code})",
             f"call.arguments.{p['source']} != call.arguments.{p['target']} && {moved} <= call.arguments.{p['amount']}"
             f" && (response.status != \"ok\" || {moved} == call.arguments.{p['amount']}) && "
             f"({changed(bp)} || ({source} && {target}))")]


def batch_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    out = plan.out
    count, failed, ids = f"response.{out['count']}", f"response.{out['failed']}", f"call.arguments.{plan.params['ids']}"
    return [(f"{out['count']} + the {out['failed']} add up to the ids given; partial exactly when some failed",
             f"response.status == \"error\" ? {count} == 0 : {count} + size({failed}) == size({ids}) && "
             f"(response.status == \"partial\") == (size({failed}) > 0)")]


def login_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    auth = bp.login
    token, expires = f"response.{auth['token_key']}", f"response.{auth['expires_key']}"
    return [(f"{auth['token_key']} is {auth['prefix']}… ({auth['describe']}), \"\" on failure; it expires "
             f"{period_text(auth['ttl'])} after now",
             f"response.status == \"error\" ? {token} == \"\" : {token}.matches({_q(auth['pattern'])}) && "
             f"timestamp({expires}) - timestamp(state.{bp.now_key}) == duration(\"{auth['ttl']}s\")")]


def no_rule(bp: Blueprint, plan: ToolPlan) -> list[tuple[str, str]]:
    """The shapes' tools (shapes.py) say what they answer in their descriptions."""
    return []


RULES = {"get": get_rule, "search": search_rule, "create": create_rule, "update": update_rule, "delete": delete_rule,
         "action": action_rule, "transfer": transfer_rule, "batch": batch_rule, "login": login_rule,
         "find": no_rule, "owned": no_rule, "union": no_rule, "text": no_rule}
__all__ = ["world_rules", "RFC3339_PATTERN"]
