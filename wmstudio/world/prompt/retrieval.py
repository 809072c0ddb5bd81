"""A listing's records, found in the state the prompt shows: the prompt's own computed query state.

A small world model cannot scan 200 records for those a search matches, and the copy head can fill a listing's
items only from records laid out in the listing's order. This finds them the generic way, reading nothing but the
call, the called tool and the state the prompt shows (no simulator): the response's list of records names the
state's collection it lists (`orders` lists `orders`; else the collection whose fields the items share most), each
call argument that names a field of those records filters them (equal text or number, a date's prefix, a part of
the text for `*_contains` / `q` / `query`), the tool's descriptions give the order (`newest first`, `earliest
first`, `in id order`) and the page size (`5 per page`, `at most 8`), and `page` / `page_size` / `limit` choose the
page; a page token an earlier response gave continues after the last record that response listed (an unknown token:
the page is not shown). Shown as the COMPUTED QUERY STATE: `{"matching": N, "page": [records of the page]}`."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.call_local import is_collection
from wmstudio.world.records import (  # noqa: F401 - matches and understood are read from here too
    CONTAINS_ARGS,
    DATE,
    PAGE_ARGS,
    SIZE_ARGS,
    filtered_field,
    matches,
    page_token,
    pages_or_signs,
    plain_name,
    singular,
    understood,
)
from wmstudio.world.spec import Call
from wmstudio.world.tools import Tool
from wmstudio.world.tools.schema import listed_items

MAX_PAGE = 10  # records shown when neither the call nor the tool says how many a page holds
SIZE_WORDS = re.compile(r"(\d+)\s+(?:per page|at most|results? per)|at most\s+(\d+)|up to\s+(\d+)|(\d+)\s+max",
                        re.IGNORECASE)
ORDER_WORDS = re.compile(r"\b(newest|latest|most recent|earliest|oldest)\s+first\b|\bin\s+(\w+)\s+order\b",
                         re.IGNORECASE)
TIME = re.compile(r"^\d{2}:\d{2}")


@dataclass(frozen=True)
class Listing:
    """What a list call lists: the collection the state keeps, the records its filters match (in the listing's
    order), where its page starts (None when its page token does not decode) and the page size."""

    collection: list[Any]
    matching: list[dict[str, Any]]
    start: int | None
    size: int

    @property
    def page(self) -> list[dict[str, Any]] | None:
        return None if self.start is None else self.matching[self.start:self.start + self.size]


def find_listing(tool: Tool | None, call: Call, state: Any, history: Sequence[HistoryStep] = (),
                 revise: Callable[[list[Any]], list[Any]] | None = None) -> Listing | None:
    """The listing a call's response shows from a collection of the state (as `revise` leaves it: the records as
    the history's answers changed them); None when the tool lists none, or no collection of the state is what it
    lists."""
    if tool is None or not isinstance(call.arguments, dict) or not isinstance(state, dict):
        return None
    listed = listed_items(tool.response)
    if listed is None:
        return None
    key, items = listed
    found = _collection(state, key, items)
    if found is None:
        return None
    found = revise(found) if revise is not None else found
    records = [record for record in found if matches(record, call.arguments)]
    records = _ordered(records, f"{tool.description} {_description(tool.response, key)}")
    size = _page_size(call.arguments, tool, key)
    token = next((value for name, value in call.arguments.items() if page_token(name)
                  and isinstance(value, str) and value), None)
    if token is not None:
        start = _after_token(token, key, records, history)
    else:
        page = _whole(next((value for name, value in call.arguments.items() if plain_name(name) in PAGE_ARGS), 1))
        start = (page - 1) * size if page and page >= 1 else 0
    return Listing(found, records, start, size)


def listing_records(tool: Tool | None, call: Call, state: Any, history: Sequence[HistoryStep] = ()
                    ) -> dict[str, Any] | None:
    """`{"matching": N, "page": [...]}` for a call whose response lists records of a collection the state shows
    (`{"matching": N}` when its page token does not decode); None as find_listing."""
    found = find_listing(tool, call, state, history)
    if found is None:
        return None
    if found.start is None:
        return {"matching": len(found.matching)}
    return {"matching": len(found.matching), "page": found.page}


def _after_token(token: str, key: str, records: list[dict[str, Any]], history: Sequence[HistoryStep]) -> int | None:
    """Where the page a token asks for starts: after the last record of the earlier response that gave the token."""
    for step in reversed(list(history)):
        answer = step.response_value()
        if not isinstance(answer, dict) or token not in answer.values() or not isinstance(answer.get(key), list):
            continue
        listed = [item for item in answer[key] if isinstance(item, dict)]
        if not listed:
            return None
        last = set(v for v in listed[-1].values() if isinstance(v, (str, int)) and not isinstance(v, bool))
        for index, record in enumerate(records):
            if last & set(v for v in record.values() if isinstance(v, (str, int)) and not isinstance(v, bool)) \
                    and _same_record(listed[-1], record):
                return index + 1
        return None
    return None


def _same_record(listed: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether a listed item is this record: every id-like value it shows (text with a digit) is one of the record's."""
    ids = [v for v in listed.values() if isinstance(v, str) and any(ch.isdigit() for ch in v)]
    return bool(ids) and all(v in record.values() for v in ids)


def _collection(state: dict[str, Any], key: str, items: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The state's records the listing lists: the collection of the same name, else the one whose records share the
    most field names with the items (at least two)."""
    collections = {name: _records(value) for name, value in state.items()}
    collections = {name: records for name, records in collections.items() if records}
    if key in collections:
        return collections[key]
    kind = next((words[:-1] for words in map(_words, items) if len(words) > 1 and words[-1] == "id"), None)
    named = [records for name, records in collections.items() if kind and _words(name) == kind]
    if named:  # the items' own id (`pet_id`, the first id field) names the collection (`pets`)
        return named[0]
    wanted = {_stem(name) for name in items}
    best, shared = None, 1
    for name, records in collections.items():
        overlap = len(wanted & {_stem(field) for field in records[0]})
        if overlap > shared:
            best, shared = records, overlap
    return best


def _records(value: Any) -> list[dict[str, Any]] | None:
    """A list of objects, or an id-keyed map's entries (each with its key as `id` when it has none)."""
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return value
    if isinstance(value, dict) and value and is_collection(value) and all(isinstance(v, dict) for v in value.values()):
        return [{"id": key, **entry} if "id" not in entry else entry for key, entry in value.items()]
    return None


def _ordered(records: list[dict[str, Any]], described: str) -> list[dict[str, Any]]:
    """`records` in the order the tool's words give (newest/earliest first by the first date field, or in a named
    field's order); as the state keeps them otherwise."""
    match = ORDER_WORDS.search(described)
    if match is None or not records:
        return records
    if match.group(1):  # by the record's dates and times, in the order its fields come
        when = [k for k, v in records[0].items() if isinstance(v, str) and (DATE.match(v) or TIME.match(v))]
        if not when:
            return records
        newest = match.group(1).lower() in ("newest", "latest", "most recent")
        return sorted(records, key=lambda r: tuple(str(r.get(k, "")) for k in when), reverse=newest)
    field = next((k for k in records[0] if _stem(k) == _stem(match.group(2))), None)
    if field is None:
        return records
    return sorted(records, key=lambda r: (str(type(r.get(field))), r.get(field) if r.get(field) is not None else ""))


def _page_size(arguments: dict[str, Any], tool: Tool, key: str) -> int:
    """The call's page size, else the one the tool's words state, else MAX_PAGE."""
    for name, value in arguments.items():
        size = _whole(value) if plain_name(name) in SIZE_ARGS else None
        if size is not None and size >= 1:
            return min(size, 100)
    for text in (tool.description, _description(tool.response, key)):
        match = SIZE_WORDS.search(text or "")
        if match:
            return int(next(group for group in match.groups() if group))
    return MAX_PAGE


def _description(schema: Any, key: str) -> str:
    if key == "" and isinstance(schema, dict):  # the response is the array itself
        return schema.get("description", "")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    value = (properties or {}).get(key)
    return value.get("description", "") if isinstance(value, dict) else ""


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def _words(name: str) -> list[str]:
    """`freezerBoxes` / `freezer_box` -> ["freezer", "box"]: lower-case words, each singular."""
    words = re.split(r"[^A-Za-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower())
    return [singular(word) for word in words if word]


def _stem(name: str) -> str:
    """`order_status` -> `status`, `charge_id` -> `id`, `orders` -> `order`: the last word, singular."""
    word = re.split(r"[^A-Za-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", str(name)).lower())[-1] or str(name)
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word
