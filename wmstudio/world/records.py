"""The values a call names and the records they name in a state: what a lookup answers from, read by the prompt's
call-local cut, the heads, the checks and the baselines alike."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call

MIN_NUMBER_NEEDLE = 100  # smaller numbers (counts, pages, flags) match too many records to mean anything
ENVELOPE_FIELDS = frozenset({"status", "error", "message"})  # an answer's own outcome, never a record's field


def needles_of(value: Any, strict: bool = False) -> set[str | int | float]:
    """The values in `value` (a call's arguments, a turn) that a record can share: strings of 2+ characters and
    numbers from 100; `strict` keeps only id-like strings (a digit, `/`, `@`, `-` or `_` in them), for history."""
    found: set[str | int | float] = set()
    for leaf in json_leaves(value):
        if isinstance(leaf, bool):
            continue
        if isinstance(leaf, (int, float)) and abs(leaf) >= MIN_NUMBER_NEEDLE:
            found.add(leaf)
        elif isinstance(leaf, str) and len(leaf.strip()) >= 2 and len(leaf) <= 200:
            if not strict or re.search(r"[\d/@_-]", leaf):
                found.add(leaf.strip())
    return found


def named_record(state: Any, call: Call) -> dict[str, Any] | None:
    """The first object in `state` holding an id-like value the call sends (a record keyed by that id, with it)."""
    found = named_record_at(state, call)
    return found[1] if found is not None else None


def named_record_at(state: Any, call: Call) -> tuple[tuple[str | int, ...], dict[str, Any]] | None:
    """(its key path in `state`, the record) for named_record; a record keyed by the id gets it as `id`. The
    record an id-like value the call sends names; else the one record holding an argument's value under the
    argument's own key, compared as a lookup by that field compares it (found_by_field); only then the one a
    session or page token names (a lookup by a name sends the session too; it is not about the session)."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {"": call.arguments}
    signs = {key for key in arguments if pages_or_signs(key)}
    return _holding(state, [arguments[key] for key in arguments if key not in signs]) \
        or found_by_field(state, call.arguments) or _holding(state, [arguments[key] for key in signs])


def _holding(state: Any, values: list) -> tuple[tuple[str | int, ...], dict[str, Any]] | None:
    """The first record (breadth first) holding an id-like string of `values`, or keyed by one."""
    needles = {n for value in values for n in needles_of(value, strict=True) if isinstance(n, str)}
    queue: list[tuple[tuple[str | int, ...], Any]] = [((), state)] if needles else []
    while queue:
        path, node = queue.pop(0)
        if isinstance(node, dict):
            if any(isinstance(v, str) and v in needles for v in node.values()):
                return _enclosing_record(state, path, node)
            for key, child in node.items():
                if key in needles and isinstance(child, dict):
                    return path + (key,), {"id": key, **child}
                queue.append((path + (key,), child))
        elif isinstance(node, list):
            queue.extend((path + (index,), child) for index, child in enumerate(node))
    return None


def found_by_field(state: Any, arguments: Any) -> tuple[tuple[str | int, ...], dict[str, Any]] | None:
    """The one record whose field of an argument's key (`displayName` for `display_name`) holds the argument's
    value in any case and spacing, a phone number by its digits: a lookup by a name, an email or a phone. Never by
    an id (ids are exact), and None where two records hold the value (it names neither)."""
    if not isinstance(arguments, dict) or not isinstance(state, (dict, list)):
        return None
    wanted = {(plain_name(key), normalised(value)) for key, value in arguments.items()
              if isinstance(value, str) and len(value.strip()) >= 2 and not plain_name(key).endswith("id")
              and not pages_or_signs(key)}
    if not wanted:
        return None
    hits: dict[tuple[str | int, ...], dict[str, Any]] = {}
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), state)]
    while stack and len(hits) < 2:
        path, node = stack.pop()
        if isinstance(node, dict):
            if any(isinstance(v, str) and (plain_name(k), normalised(v)) in wanted for k, v in node.items()):
                at, record = _enclosing_record(state, path, node)
                hits[at] = record
            stack.extend((path + (key,), child) for key, child in node.items() if isinstance(child, (dict, list)))
        elif isinstance(node, list):
            stack.extend((path + (index,), child) for index, child in enumerate(node)
                         if isinstance(child, (dict, list)))
    return next(iter(hits.items())) if len(hits) == 1 else None


def normalised(value: object) -> str:
    """A value as a lookup by it compares it: any case and spacing; a phone number by its digits."""
    text = " ".join(str(value).split()).casefold()
    digits = "".join(ch for ch in text if ch.isdigit())
    return digits if len(digits) >= 7 and not set(text) - set("0123456789+-(). ") else text


def _enclosing_record(state: Any, path: tuple, node: dict[str, Any]) -> tuple[tuple[str | int, ...], dict[str, Any]]:
    """The record an object holding a call's value belongs to: the object itself where it holds its own id (or no
    record encloses it), else the nearest enclosing list item that does, or map entry keyed by an id (a customer's
    second phone, `customers[3].phones[1]`, names the customer; `huts.K3NB.contact` the hut)."""
    if any(key in node for key in own_id_keys(path)):
        return path, node
    for cut in range(len(path) - 2, -1, -1):
        part, outer = path[cut], path[:cut + 1]
        found = state
        for step in outer:
            found = found[step]
        if not isinstance(found, dict):
            continue
        if isinstance(part, int) and any(key in found for key in own_id_keys(outer)):
            return outer, found
        if isinstance(part, str) and cut > 0 and re.search(r"\d", part) and part in needles_of(part, strict=True):
            return outer, {"id": part, **found}
    key = path[-1] if path else None
    if isinstance(key, str) and len(path) >= 2 and re.search(r"\d", key) and key in needles_of(key, strict=True):
        return path, {"id": key, **node}  # a record a map keys by its id
    return path, node


def record_with_id(state: Any, value: str, skip: tuple = ()) -> tuple[tuple[str | int, ...], dict[str, Any]] | None:
    """(its key path, the record) of the record of `state` whose own id is `value`: the entry a map keys by it, or
    the object holding it under `id` or its collection's `<kind>_id` / `<kind>Id`; never the one at `skip`."""
    queue: list[tuple[tuple[str | int, ...], Any]] = [((), state)]
    while queue:
        path, node = queue.pop(0)
        if isinstance(node, dict):
            if path != skip and any(node.get(key) == value for key in own_id_keys(path)):
                return path, node
            for key, child in node.items():
                if key == value and isinstance(child, dict) and path + (key,) != skip:
                    return path + (key,), {"id": key, **child}
                queue.append((path + (key,), child))
        elif isinstance(node, list):
            queue.extend((path + (index,), child) for index, child in enumerate(node))
    return None


def own_id_keys(path: tuple) -> tuple[str, ...]:
    """The keys a record at `path` holds its own id under: `id`, and `dock_station_id` / `dockStationId` for one
    under `dock_stations` / `dockStations`."""
    collection = next((p for p in reversed(path) if isinstance(p, str)), "")
    kind = singular(collection)
    return ("id", f"{kind}_id", f"{kind}Id") if kind else ("id",)


def singular(word: str) -> str:
    """A collection's name for one of its records: `orders` -> `order`, `visitor_passes` -> `visitor_pass`,
    `boxes` -> `box`, `categories` -> `category`; `status` and `analysis` stay as they are."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("xes", "ches", "shes", "sses")):
        return word[:-2]
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")) else word


def json_leaves(value: Any, keys: bool = False) -> Iterator[Any]:
    """Every scalar inside a JSON value (and every map key, with `keys`), in no particular order."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if keys:
                yield from node.keys()
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
        else:
            yield node


def newest_answer_naming(history: Sequence[HistoryStep], needles: frozenset | set) -> dict[str, Any] | None:
    """The newest earlier answer, not an error, holding one of `needles` among its values: what the world last said
    of that record. A refusal echoes the id beside neutral values ("" and 0) that say nothing of the record."""
    for step in reversed(list(history)):
        answer = step.response_value()
        if isinstance(answer, dict) and answer.get("status") != "error" \
                and needles & {value for value in answer.values() if isinstance(value, str)}:
            return answer
    return None


# --- whether a record matches a list call's filters (the listing copy and the listing checks read it alike) ---

PAGE_ARGS = ("page", "pagenumber")  # argument names with case and separators dropped (`pageNumber`, `page_number`)
SIZE_ARGS = ("pagesize", "limit", "perpage", "maxresults", "count", "size")
CREDENTIALS = ("sessionid", "sessionkey", "apikey", "authorization")  # besides every `...token`
CONTAINS_ARGS = ("q", "query", "search", "text")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


def plain_name(name: str) -> str:
    """An argument's name in lower case without separators: `maxResults`, `max_results` -> `maxresults`."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def pages_or_signs(name: str) -> bool:
    """Whether an argument pages or authenticates the call rather than filtering: a page size or number, a
    token or cursor, or a session's credentials."""
    plain = plain_name(name)
    return plain in SIZE_ARGS or plain in PAGE_ARGS or plain.endswith("token") or plain in CREDENTIALS \
        or page_token(name)


def page_token(name: str) -> bool:
    """Whether an argument passes back where an earlier page ended, as that page's answer said it (`page_token`,
    `nextPageToken`, `cursor`, `starting_after`), not a session's token."""
    plain = plain_name(name)
    return plain.endswith("cursor") or plain in ("startingafter", "continuationtoken") \
        or (plain.endswith("token") and ("page" in plain or "next" in plain))


def understood(arguments: dict[str, Any], records: list[dict[str, Any]]) -> bool:
    """Whether listing_records reads every argument of a list call: a page number or size, a token (a page's or a
    session's) or a session's id, or a filter on a field the records hold (not a cursor or offset, nor a filter they
    lack)."""
    for name, value in arguments.items():
        if any(filtered_path(name, record)[0] is not None for record in records[:1]):
            continue  # a filter on a field the records hold (nested ones too)
        if pages_or_signs(name):
            continue
        if "cursor" in name.lower() or "offset" in name.lower():
            return False
        if value not in (None, ""):
            return False
    return True


def matches(record: dict[str, Any], arguments: dict[str, Any]) -> bool:
    """Whether every argument that names a field of `record` (or a part of its text) holds for it."""
    for name, wanted in arguments.items():
        if isinstance(wanted, (dict, list)) or wanted is None or wanted == "":
            continue
        path, contains = filtered_path(name, record)
        if path is None:
            continue
        value = record
        for part in path:
            value = value[part]
        if isinstance(wanted, bool) or isinstance(value, bool):
            if wanted != value:
                return False
        elif isinstance(wanted, (int, float)) and isinstance(value, (int, float)):
            if wanted != value:
                return False
        elif isinstance(value, str) and isinstance(wanted, str):
            have, want = value.lower(), wanted.strip().lower()
            if contains:
                if want not in have:
                    return False
            elif DATE.match(want) and DATE.match(have):
                if not have.startswith(want[:10]):
                    return False
            elif have != want:
                return False
        elif str(value).lower() != str(wanted).lower():
            return False
    return True


NAME_SYNONYMS = {  # an argument's plain name -> the field names that say the same in a record
    "origin": ("from", "source", "departure"), "from": ("origin", "source", "departure"),
    "destination": ("to", "dest", "arrival"), "to": ("destination", "dest", "arrival"),
}


def filtered_path(argument: str, record: dict[str, Any]) -> tuple[tuple[str, ...] | None, bool]:
    """(the path of the record's field an argument filters, whether by a part of its text): a field of its own
    (filtered_field), else one of the same or a synonymous name (`origin` and `from`), at the top or inside one of
    the record's objects (`from` -> `route.from`); (None, False) when it names none."""
    field, contains = filtered_field(argument, record)
    if field is not None:
        return (field,), contains
    if pages_or_signs(argument):
        return None, False
    plain = plain_name(argument)
    names = {plain, *NAME_SYNONYMS.get(plain, ())}
    for key, value in record.items():
        if plain_name(key) in names and value is not None and not isinstance(value, (dict, list)):
            return (key,), False
    for key, value in record.items():
        for sub, leaf in (value.items() if isinstance(value, dict) else ()):
            if plain_name(sub) in names and leaf is not None and not isinstance(leaf, (dict, list)):
                return (key, sub), False
    return None, False


def filtered_field(argument: str, record: dict[str, Any]) -> tuple[str | None, bool]:
    """(the record's field an argument filters, whether by a part of its text); (None, False) when it names none."""
    lowered = argument.lower()
    if argument in record and isinstance(record[argument], str):  # `size: "large"` filters the records' own size
        return argument, False
    if pages_or_signs(argument):
        return None, False
    if argument in record and not isinstance(record[argument], (dict, list)):
        return argument, False
    plain = plain_name(argument)
    for suffix in ("contains", "like", "prefix"):  # `name_contains`, `displayNameContains`
        field = next((key for key in record if plain == plain_name(key) + suffix), None)
        if field is not None and isinstance(record[field], str):
            return field, True
    if lowered in CONTAINS_ARGS:
        name = next((k for k in ("name", "title", "text") if isinstance(record.get(k), str)), None)
        return name, name is not None
    if lowered == "date":  # a date filter reads the record's own date, or its first time
        return next((k for k, v in record.items() if isinstance(v, str) and DATE.match(v)), None), False
    return None, False
