"""What an answer copies from the episode's state before the model writes, one order for every answerer (generation
and echo++ alike): a string answer's text (model/heads/text_answer.py), else the record the call names (its owner, its
union variant: model/heads/record_copy.py), else the page a list call finds (model/heads/listing_copy.py), else a folder's or a
search's entries (model/heads/folder_listing.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from wmstudio.model.heads.folder_listing import or_folder
from wmstudio.model.heads.listing_copy import or_listing
from wmstudio.model.heads.record_copy import RecordCopy, record_copy
from wmstudio.model.heads.text_answer import text_answer
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call, WorldSpec


def state_copy(world: WorldSpec, call: Call, history: Sequence[HistoryStep], schema: Any,
               state: Any) -> RecordCopy | None:
    """The copy the answer to `call` takes from `state` (the state `history` left), or None."""
    return text_answer(world, call, history, schema, state) or or_folder(
        or_listing(record_copy(world, call, history, schema, state), world, call, history, schema, state),
        world, call, history, schema, state)
