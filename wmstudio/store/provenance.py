"""How a step's response came to be: a model run (model, sampler settings, seed, anchors) or a person's edit.

An edit keeps the original response and how that was made, so a curated rollout never hides what the model
actually wrote; exported datasets and ratings can tell the two apart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from wmstudio.problems import InvalidInput, Problem
from wmstudio.world.steering.anchors import Anchor

MADE_BY_KINDS = ("model", "human", "human edit", "imported")


@dataclass
class MadeBy:
    """Provenance of a response. `kind` is "model", "human" (typed by hand), "human edit" (a changed response) or
    "imported" (read from another project's file, named in `source`).

    For an edit, `original_response` and `original` (how that response was made) keep the first version."""

    kind: str
    model: str | None = None
    sampler: dict[str, Any] = field(default_factory=dict)  # settings as the sampler names them (steps, strategy...)
    seed: int | None = None
    anchors: list[dict[str, Any]] = field(default_factory=list)  # [{"path": "status", "value": "error"}]
    editor: str | None = None
    original_response: str | None = None
    original: MadeBy | None = None
    source: str | None = None  # the file an imported response came from, with its line
    outcome: dict[str, Any] | None = None  # the outcome head's choice, when it chose status and error code

    @classmethod
    def by_model(cls, model: str, sampler: dict[str, Any] | None = None, seed: int | None = None,
                 anchors: Sequence[Anchor | dict[str, Any]] = (), outcome: dict[str, Any] | None = None) -> MadeBy:
        """A response sampled from `model` with these sampler settings, seed and pinned anchors (and `outcome`,
        the status and error code its outcome head chose, so a reader knows they were not the user's)."""
        pinned = [a.to_json() if isinstance(a, Anchor) else dict(a) for a in anchors]
        return cls(kind="model", model=model, sampler=dict(sampler or {}), seed=seed, anchors=pinned,
                   outcome=dict(outcome) if outcome else None)

    @classmethod
    def by_hand(cls, editor: str | None = None) -> MadeBy:
        """A response a person wrote from scratch."""
        return cls(kind="human", editor=editor)

    @classmethod
    def imported_from(cls, source: str) -> MadeBy:
        """A response read from someone else's file (`source`: its name and line), not made in the studio."""
        return cls(kind="imported", source=source)

    def edited(self, original_response: str, editor: str | None = None) -> MadeBy:
        """Provenance after a person changes the response; a second edit still points at the first original."""
        if self.kind == "human edit":
            return MadeBy(kind="human edit", editor=editor, original_response=self.original_response,
                          original=self.original)
        return MadeBy(kind="human edit", editor=editor, original_response=original_response, original=self)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind}
        if self.model is not None:
            data["model"] = self.model
        if self.sampler:
            data["sampler"] = self.sampler
        if self.seed is not None:
            data["seed"] = self.seed
        if self.anchors:
            data["anchors"] = self.anchors
        if self.editor is not None:
            data["editor"] = self.editor
        if self.original_response is not None:
            data["original_response"] = self.original_response
        if self.original is not None:
            data["original"] = self.original.to_json()
        if self.source is not None:
            data["source"] = self.source
        if self.outcome is not None:
            data["outcome"] = self.outcome
        return data

    @classmethod
    def from_json(cls, data: Any, source: str = "made_by") -> MadeBy:
        """Read provenance back; InvalidInput names a missing or unknown `kind`."""
        if not isinstance(data, dict) or data.get("kind") not in MADE_BY_KINDS:
            raise InvalidInput(Problem(f"{source}.kind", f"must be one of {', '.join(MADE_BY_KINDS)}"))
        original = data.get("original")
        return cls(
            kind=data["kind"],
            model=data.get("model"),
            sampler=dict(data.get("sampler") or {}),
            seed=data.get("seed"),
            anchors=list(data.get("anchors") or []),
            editor=data.get("editor"),
            original_response=data.get("original_response"),
            original=cls.from_json(original, f"{source}.original") if original is not None else None,
            source=data.get("source"),
            outcome=dict(data["outcome"]) if isinstance(data.get("outcome"), dict) else None,
        )
