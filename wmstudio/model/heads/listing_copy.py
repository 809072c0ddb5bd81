"""Copying a listing whole: the records a read-only list call answers with, found in the structured state by the
call's filters and page as the prompt's computed query state finds them (world/prompt/retrieval.find_listing),
never cut by the prompt's budget. The collection is taken as the episode left it (world/episode/: each earlier
answer and write applied, so an order cancelled since is listed among the cancelled), the records earlier writes
created first where the tool lists newest first. An empty page is written too: its count and the flag saying there
is no more; a page with more after it gets a next-page token minted for its call, which a later call passing it back
is answered from. A page whose canvas would overflow the context is cut to its first records (model/generation/generation.py's
fitted_listing), its count, flag and token saying what follows.

A small model reading a page the budget cut writes the first records and makes up the rest (`find_pets` listing
`pe_4kh5lcwj` as `2_3333337700`). The listing's items are laid out one slot group per record found (no more, no
fewer), and each item's fields that a record holds (by key, `<kind>_id` from `id`, `<kind>_<field>` from `field`)
are written before denoising, as a named record's are (model/heads/record_copy.py); the copy head and the denoiser fill
what the records lack. A write is left alone: what it lists is what it changed."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from wmstudio.model.canvas.layout import ExactItems, Holds
from wmstudio.model.heads.call_echoes import names_a_record
from wmstudio.model.heads.copy_head import key_words
from wmstudio.model.heads.record_copy import RecordCopy
from wmstudio.problems import InvalidInput
from wmstudio.world.episode.state import state_after
from wmstudio.world.heads.copy_sources import shown_leaves
from wmstudio.world.history import HistoryStep
from wmstudio.world.jsonpath import format_path
from wmstudio.world.prompt.retrieval import find_listing, understood
from wmstudio.world.records import ENVELOPE_FIELDS, json_leaves, newest_answer_naming
from wmstudio.world.spec import Call, WorldSpec
from wmstudio.world.steering.directives import Steering, steering
from wmstudio.world.tools import Tool
from wmstudio.world.tools.reading import read_only
from wmstudio.world.tools.schema import listed_items

NEWEST_FIRST = re.compile(r"\b(newest|latest|most recent)\s+first\b", re.IGNORECASE)  # a new record leads


def listing_copy(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
                 max_items: int | None = None, state: Any = None) -> RecordCopy | None:
    """The copy of the page a read-only list call answers with; None when the call lists nothing the state holds.
    `max_items` cuts the page to its first records (the count, the has-more flag and the next-page token then say
    what follows), as an API pages an answer too long to send. `state`: the state `history` left, when known."""
    tool = next((t for t in world.tools if t.name == call.name), None)
    listed = listed_items(schema)
    if tool is None or not read_only(tool) or listed is None:
        return None
    key, fields = listed
    state = state_after(world, history) if state is None else state
    found = find_listing(tool, call, state, history, as_history_left(world, tool, history))
    if found is None or found.page is None or not isinstance(call.arguments, dict) \
            or not understood(call.arguments, found.collection):  # a cursor, or a filter it cannot read
        return None
    records = [record for record in found.page if isinstance(record, dict)]
    matching = len(found.matching)
    steer = listing_steering(world)
    if steer.empty_result:
        records = []
    elif steer.page_size:
        records = records[:steer.page_size]
    if max_items is not None:
        records = records[:max(max_items, 0)]
    laid = [laid_out(fields, record) for record in records]
    page = ExactItems([shape for shape, _ in laid])
    at = [key] if key else []  # "": the response is the array itself
    values = {format_path([*at, index, *path]): value for index, (_, held) in enumerate(laid)
              for path, value in held.items()}
    if key:
        shape: Any = {**dict.fromkeys((schema.get("properties") or {})), key: page}
        values.update(page_values(schema, key, 0 if steer.empty_result else matching, len(records), call,
                                  0 if steer.empty_result else found.start))
    else:
        shape = page
    sources = [source for index, record in enumerate(records)
               for source in shown_leaves(record, ("listing", index), "query", 0, set())]
    return RecordCopy(shape, values, list(dict.fromkeys(sources)), len(records))


def page_values(schema: dict[str, Any], listed: str, matching: int, shown: int, call: Call,
                start: int | None = None) -> dict[str, Any]:
    """The page's own top-level fields where the records found say them: a count (`total`, `count`, `matching`) is
    how many match, the page number the one asked for (else 1); where the page starts is known (`start`, or a first
    page: no page number, page token, cursor or offset asked), whether there are more (`has_more`, `more`) or it is
    the last (`last_page`), and a next-page token or cursor: empty when there are no more, else one minted for
    the next page (`next_page_token`)."""
    properties = schema.get("properties") or {}
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    if start is None and not any(words & {"cursor", "offset"} or ("page" in words and not words & {"size", "limit"})
                                 or ("token" in words and ("next" in words or words == {"token"}))  # not a session's
                                 for words in map(set, map(key_words, arguments))):  # `page_size` asks no other page
        start = 0
    placed = start is not None  # where the page ends is known
    more = matching > (start or 0) + shown
    values: dict[str, Any] = {}
    for name, sub in properties.items():
        words, kind = set(key_words(name)), (sub or {}).get("type") if isinstance(sub, dict) else None
        if name == listed:
            continue
        if kind == "integer" and words & {"total", "count", "matching"}:
            values[format_path([name])] = matching
        elif kind == "integer" and words in ({"page"}, {"page", "number"}):
            values[format_path([name])] = next((v for k, v in arguments.items() if set(key_words(k)) == words
                                                and isinstance(v, int) and not isinstance(v, bool)), 1)
        elif placed and kind == "boolean" and ("more" in words or words >= {"has", "next"}):  # `hasNext` too
            values[format_path([name])] = more
        elif placed and kind == "boolean" and "last" in words:
            values[format_path([name])] = not more
        elif placed and kind == "string" and "next" in words and words & {"token", "cursor", "page"}:
            values[format_path([name])] = next_page_token(call, (start or 0) + shown) if more else ""
    return values


def next_page_token(call: Call, start: int) -> str:
    """An opaque token for the page that starts at `start`, the same for the same call: a listing with more
    records than its page holds must give one (an empty token says it is the last page), and a later call that
    passes it back reads its page from the answer that gave it (world/prompt/retrieval.py), as a real API's does."""
    asked = json.dumps([call.name, call.arguments], sort_keys=True, default=str)
    digest = hashlib.sha256(asked.encode()).hexdigest()[:8]
    return base64.urlsafe_b64encode(f"{start}:{digest}".encode()).decode().rstrip("=")


def listing_steering(world: WorldSpec) -> Steering:
    """What the world's vocabulary directives ask of a listing (an empty result, a page size), free text left out."""
    try:
        return steering(world.directives)
    except InvalidInput:
        return Steering()


def laid_out(fields: dict[str, Any], record: dict[str, Any]) -> tuple[dict[str, Any], dict[tuple, Any]]:
    """A listed record as an item of `fields` (the item schema's properties): its shape, and its values by path
    within the item; an object field (`address`) laid out by its own fields, the record's object copied into them."""
    shape: dict[str, Any] = {}
    held: dict[tuple, Any] = {}
    for name, schema in fields.items():
        inner = record.get(name) if isinstance(record.get(name), dict) else None
        parts = schema.get("properties") if isinstance(schema, dict) else None
        if inner is not None and isinstance(parts, dict) and parts:
            nested, values = laid_out(parts, inner)
            shape[name] = nested
            held.update({(name, *path): value for path, value in values.items()})
            continue
        value = item_field(record, name)
        shape[name] = Holds(value) if value is not None else None
        if value is not None:
            held[(name,)] = value
    return shape, held


def item_field(record: dict[str, Any], name: str) -> str | int | float | None:
    """The record's scalar for an item field `name`: the same key, `id` for `<kind>_id`, `field` for
    `<kind>_field`; None when the record holds none."""
    if name in record:
        value = record[name]
    elif names_a_record(name) and "id" in record:
        value = record["id"]
    elif "_" in name and name.split("_", 1)[1] in record:
        value = record[name.split("_", 1)[1]]
    else:
        return None
    return value if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def as_answered(record: dict[str, Any], history: Sequence[HistoryStep]) -> dict[str, Any]:
    """`record` with the scalar fields the newest earlier ok answer naming it by its id shows (a write since the
    initial state changed them); another record's id in that answer (a refund's `refund_id`) is not its own."""
    own = next((value for field, value in record.items() if names_a_record(field) and isinstance(value, str)), None)
    if own is None:
        return record
    answer = newest_answer_naming(history, {own})
    if answer is None:
        return record
    fields = {(k if k in record else k.split("_", 1)[-1]): v for k, v in answer.items()  # `order_status` for `status`
              if k not in ENVELOPE_FIELDS and not isinstance(v, (dict, list)) and not names_a_record(k)}
    return {**record, **{k: v for k, v in fields.items() if k in record}}


def as_history_left(world: WorldSpec, tool: Tool, history: Sequence[HistoryStep]
                    ) -> Callable[[list[Any]], list[Any]]:
    """What a listed collection is after `history`: each record as the newest answer naming it shows it, and the
    records earlier writes created (first where the tool lists newest first)."""
    listed = listed_items(tool.response)
    fields = listed[1] if listed is not None else ()

    first = {leaf for leaf in json_leaves(world.initial_state, keys=True) if isinstance(leaf, str)}

    def revise(collection: list[Any]) -> list[Any]:
        records = [as_answered(record, history) if isinstance(record, dict) else record for record in collection]
        made = created_records(history, records, fields, world)  # what the episode state could not place
        fresh = [record for record in records if isinstance(record, dict)
                 and (own := _own_id(record)) is not None and own not in first]
        records = [record for record in records if not any(record is new for new in fresh)]
        if NEWEST_FIRST.search(tool.description or ""):
            return made[::-1] + fresh[::-1] + records
        return records + fresh + made

    return revise


def _own_id(record: dict[str, Any]) -> Any:
    """The value a record holds under its own id field (`id`, `charge_id`), or None."""
    return next((value for name, value in record.items() if names_a_record(name) and isinstance(value, str)), None)


def created_records(history: Sequence[HistoryStep], records: list[Any], fields: Sequence[str],
                    world: WorldSpec) -> list[dict[str, Any]]:
    """Records the history's ok writes created: an answer whose own id field of the listing's items (`charge_id`)
    holds an id no record has, as that answer shows it (newest last)."""
    own = next((name for name in fields if names_a_record(name)), None)
    if own is None:
        return []
    known = {item_field(record, own) for record in records if isinstance(record, dict)}
    made: dict[Any, dict[str, Any]] = {}
    for step in history:
        answer, tool = step.response_value(), next((t for t in world.tools if t.name == step.call.name), None)
        if not isinstance(answer, dict) or answer.get("status", "ok") != "ok" or tool is None or read_only(tool):
            continue
        new = answer.get(own)
        if isinstance(new, str) and new and new not in known:
            made[new] = {k: v for k, v in answer.items() if k not in ENVELOPE_FIELDS}
    return list(made.values())


def or_listing(copy: RecordCopy | None, world: WorldSpec, call: Call, history: Sequence[HistoryStep],
               schema: Any, state: Any = None) -> RecordCopy | None:
    """`copy` (the named record's), or where it lays nothing out, the listing's copy with its candidates added."""
    if copy is not None and copy.shape is not None:
        return copy
    listing = listing_copy(world, call, history, schema, state=state)
    if listing is None:
        return copy
    return listing if copy is None else RecordCopy(listing.shape, listing.values, copy.sources + listing.sources,
                                                   listing.listed)
