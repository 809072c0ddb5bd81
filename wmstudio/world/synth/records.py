"""Reading and changing a synthetic world's records whichever way its state keeps them: a list of records that
hold their id, or an object keyed by id whose records do not."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterator

from wmstudio.world.synth.blueprint import JSON, Entity


def each(state: JSON, entity: Entity) -> Iterator[tuple[str, JSON]]:
    """(id, record) for every record of `entity`, in the state's order."""
    held = state[entity.store]
    if entity.storage == "map":
        yield from held.items()
    else:
        for item in held:
            yield item[entity.id_key], item


def find(state: JSON, entity: Entity, record_id: object) -> JSON | None:
    """The record with this id, or None (an id that is not text finds nothing)."""
    if not isinstance(record_id, str):
        return None
    if entity.storage == "map":
        return state[entity.store].get(record_id)
    return next((item for item in state[entity.store] if item[entity.id_key] == record_id), None)


def count(state: JSON, entity: Entity) -> int:
    return len(state[entity.store])


def insert(state: JSON, entity: Entity, record: JSON) -> None:
    """Add a record (given with its id field) at the end."""
    if entity.storage == "map":
        fields = dict(record)
        record_id = fields.pop(entity.id_key)
        state[entity.store][record_id] = fields
    else:
        state[entity.store].append(record)


def remove(state: JSON, entity: Entity, record_id: str) -> None:
    if entity.storage == "map":
        del state[entity.store][record_id]
    else:
        state[entity.store] = [item for item in state[entity.store] if item[entity.id_key] != record_id]


def shaped(entity: Entity, records: list[JSON]) -> JSON | list[JSON]:
    """Records made with their id field, in the shape the state keeps them."""
    if entity.storage == "list":
        return records
    return {r[entity.id_key]: {k: v for k, v in r.items() if k != entity.id_key} for r in records}


def view(entity: Entity, record_id: str, record: JSON, keys: tuple[str, ...]) -> JSON:
    """A record as a response shows it: its id, then the fields `keys`."""
    return {entity.id_key: record_id, **{key: record[key] for key in keys}}


# --- page tokens: the offset and the query they belong to, in the world's own encoding -----------------------


def fingerprint(query: JSON) -> str:
    return hashlib.sha256(json.dumps(query, sort_keys=True).encode()).hexdigest()[:8]


def encode_token(style: str, offset: int, owner: str) -> str:
    raw = f"{offset}:{owner}".encode()
    if style == "hex":
        return raw.hex()
    text = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    return f"pt_{text}" if style == "prefixed" else text


def decode_token(style: str, token: object, owner: str) -> int | None:
    """The offset a token carries when it is this world's and belongs to this query, else None."""
    if not isinstance(token, str):
        return None
    try:
        if style == "hex":
            text = bytes.fromhex(token).decode()
        else:
            body = token.removeprefix("pt_") if style == "prefixed" else token
            if style == "prefixed" and not token.startswith("pt_"):
                return None
            text = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()
        offset, query = text.split(":")
    except (ValueError, UnicodeDecodeError):
        return None
    return int(offset) if offset.isdigit() and query == owner else None
