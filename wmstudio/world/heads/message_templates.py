"""Messages written to an outcome: a training answer's message with the values of the call and of the record the
call names turned into slots, learned per tool and outcome, and filled again for a new call.

Simulated tools say what happened in a sentence that names the call's ids and the record's fields ("Order ORD-23411
is processing; refunds open after delivery."). The 1.6M denoiser writes such a sentence's words but not its ids
("Order ORD-17903 was delivered 86 days ago" for ORD-23411): an id is a value to copy, and a message is free text.
So the outcome head, which already chooses the status and the error code, also writes the message its training
answers wrote for that tool and outcome, filled from the call and the state the prompt shows. A message whose ids or
large numbers neither the call nor the record holds teaches no template; a slot nothing fills leaves the message to
the denoiser."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from wmstudio.settings import is_whole
from wmstudio.world.checks.message_mentions import mentions
from wmstudio.world.sims.base import money
from wmstudio.world.spec import Call

MESSAGE_KEY = "message"
SLOT = re.compile(r"\{(money:)?(arguments|record)\.([^{}]+)\}")
SHORTEST = 3  # characters of a text value worth a slot ("ok" stays a word)
SMALLEST = 100  # a number under this is a count or a duration the message states, not a value to copy


def template_of(message: str, call: Call, record: Mapping[str, Any] | None) -> str | None:
    """`message` with each value of the call's arguments and of `record` it names turned into a slot
    (`{arguments.order_id}`, `{record.status}`, `{money:record.total_cents}`); None when an id or a large number
    is left that neither holds (the message says something a template cannot know)."""
    found: dict[str, str] = {}
    for source, values in (("arguments", call.arguments if isinstance(call.arguments, dict) else {}),
                           ("record", record or {})):
        for name, value in values.items():
            for text, slot in _spellings(source, name, value):
                found.setdefault(text, slot)
    if not found:
        return None if _unexplained(message) else message
    pattern = re.compile("|".join(rf"(?<![\w$]){re.escape(text)}(?!\w)" for text in sorted(found, key=len,
                                                                                            reverse=True)))
    template = pattern.sub(lambda match: found[match.group(0)], message.replace("{", "{{").replace("}", "}}"))
    return None if _unexplained(SLOT.sub("", template)) else template


def fill(template: str, call: Call, record: Mapping[str, Any] | None) -> str | None:
    """`template` with its slots filled from the call and `record`; None when one cannot be."""
    sources = {"arguments": call.arguments if isinstance(call.arguments, dict) else {}, "record": record or {}}
    missing = False

    def value(match: re.Match) -> str:
        nonlocal missing
        as_money, source, name = match.groups()
        found = sources[source].get(name)
        if found is None or isinstance(found, (dict, list)) or (as_money and not is_whole(found)):
            missing = True
            return ""
        return money(found) if as_money else str(found)

    text = SLOT.sub(value, template)
    return None if missing else text.replace("{{", "{").replace("}}", "}")


def _spellings(source: str, name: str, value: Any) -> list[tuple[str, str]]:
    """The ways a message writes `value`, each with its slot."""
    if isinstance(value, bool):
        return []
    if isinstance(value, str) and len(value) >= SHORTEST and "{" not in value and "}" not in value:
        return [(value, f"{{{source}.{name}}}")]
    if is_whole(value) and value >= SMALLEST:
        return [(money(value), f"{{money:{source}.{name}}}"), (str(value), f"{{{source}.{name}}}")]
    return []


def _unexplained(text: str) -> bool:
    """Whether `text` names an id, or a number of SMALLEST or more, a template cannot fill."""
    for mention in mentions(text):
        if mention.kind == "id":
            return True
        if mention.kind == "number" and (round(mention.value * 100) if mention.dollars else mention.value) >= SMALLEST:
            return True
    return False
