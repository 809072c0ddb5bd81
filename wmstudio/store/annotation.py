"""Annotation: annotators, the queue of steps to rate (fewest ratings first, then oldest), skips, ratings, progress.

Ratings are 1-5 on three dimensions with failure tags from a fixed vocabulary; one rating per annotator per
step, and rating again updates it. The per-dimension lists feed the agreement metrics."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlmodel import select

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.tables import (
    ANNOTATOR_SOURCES,
    FAILURE_TAGS,
    RATING_DIMENSIONS,
    Annotator,
    Rating,
    Rollout,
    Skip,
    Step,
    utcnow,
)
from wmstudio.world.history import HistoryStep
from wmstudio.world.spec import Call

MAX_NAME_CHARS = 100
MAX_NOTE_CHARS = 5000


@dataclass
class AnnotationItem:
    """A step to rate, shown blind (no model or sampler): its world, the earlier steps, the call and response."""

    step_id: int
    rollout_id: int
    step_index: int
    world_id: int
    history: list[HistoryStep]
    call: Call
    response: str


@dataclass
class AnnotatorProgress:
    """How far an annotator is: steps rated and skipped out of all steps there are to rate."""

    rated: int
    skipped: int
    total: int

    @property
    def remaining(self) -> int:
        return max(0, self.total - self.rated - self.skipped)


@dataclass(frozen=True)
class RatingValue:
    """One score on one dimension: the reliability data agreement is computed from."""

    step_id: int
    annotator: str
    value: int


def get_annotator(store: Store, name: str, source: str = "local") -> Annotator:
    """The annotator called `name`, created on first use; `source` is local, hf (Hugging Face login) or auth."""
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput(Problem("annotator", "give your name (or log in) before rating"))
    name = name.strip()
    if len(name) > MAX_NAME_CHARS:
        raise InvalidInput(Problem("annotator", f"name is {len(name)} characters; keep it under {MAX_NAME_CHARS}"))
    if source not in ANNOTATOR_SOURCES:
        raise InvalidInput(Problem("source", f"{source!r} is not known: use {', '.join(ANNOTATOR_SOURCES)}"))
    with store.read() as session:
        found = session.exec(select(Annotator).where(Annotator.name == name)).first()
    if found is not None:
        return found
    with store.write() as session:  # look again under the lock: another process may have added the name
        found = session.exec(select(Annotator).where(Annotator.name == name)).first()
        if found is None:
            found = Annotator(name=name, source=source)
            session.add(found)
            session.flush()
        return found


DEFAULT_OVERLAP = 2  # annotators per step before new steps are served: agreement needs steps rated twice


def next_to_annotate(store: Store, annotator_id: int, overlap: int = DEFAULT_OVERLAP) -> AnnotationItem | None:
    """The step this annotator should rate next, or None when they have rated or skipped every step.

    Steps others rated fewer than `overlap` times come first (so a small team rates the same steps and agreement
    appears), oldest first; then steps nobody rated, the newest rollout's first (the step you just saved, not a seeded
    example), each rollout's steps in order; then the rest by fewest ratings, oldest first; copies of steps in
    branches are left out."""
    if not whole_in(overlap, 1):
        raise InvalidInput(Problem("overlap", f"must be a whole number from 1, got {overlap!r}"))
    rated = sa.exists().where(Rating.step_id == Step.id, Rating.annotator_id == annotator_id)
    skipped = sa.exists().where(Skip.step_id == Step.id, Skip.annotator_id == annotator_id)
    open_steps = (Step.copied_from_step_id.is_(None), sa.not_(rated), sa.not_(skipped))
    oldest, newest = (Step.rating_count, Step.created_at, Step.id), (Step.rollout_id.desc(), Step.index, Step.id)
    tiers = [(sa.and_(Step.rating_count >= 1, Step.rating_count < overlap), oldest), (Step.rating_count == 0, newest),
             (sa.true(), oldest)]
    with store.read() as session:
        fetch_row(session, Annotator, annotator_id, "annotator_id")
        step = None
        for tier, order in tiers:
            query = select(Step).where(*open_steps, tier).order_by(*order)
            step = session.exec(query.limit(1)).first()
            if step is not None:
                break
        if step is None:
            return None
        world_id = session.exec(select(Rollout.world_id).where(Rollout.id == step.rollout_id)).one()
        earlier = session.exec(
            select(Step.call, Step.response)
            .where(Step.rollout_id == step.rollout_id, Step.index < step.index)
            .order_by(Step.index)
        ).all()
    return AnnotationItem(
        step_id=step.id,
        rollout_id=step.rollout_id,
        step_index=step.index,
        world_id=world_id,
        history=[HistoryStep(call=Call.from_json(call), response=response) for call, response in earlier],
        call=Call.from_json(step.call),
        response=step.response,
    )


def skip_step(store: Store, annotator_id: int, step_id: int) -> None:
    """Take a step out of this annotator's queue (others still get it)."""
    with store.write() as session:
        fetch_row(session, Annotator, annotator_id, "annotator_id")
        fetch_row(session, Step, step_id, "step_id")
        if session.get(Skip, (annotator_id, step_id)) is None:
            session.add(Skip(annotator_id=annotator_id, step_id=step_id))


def save_rating(
    store: Store,
    annotator_id: int,
    step_id: int,
    realism: int,
    outcome_correctness: int,
    training_utility: int,
    failure_tags: Iterable[str] = (),
    note: str = "",
) -> Rating:
    """Record (or update) this annotator's rating of a step; InvalidInput names a score or tag out of range."""
    scores = {"realism": realism, "outcome_correctness": outcome_correctness, "training_utility": training_utility}
    problems = [
        Problem(name, f"must be a whole number from 1 to 5, got {value!r}")
        for name, value in scores.items()
        if not whole_in(value, 1, 5)
    ]
    tags = [failure_tags] if isinstance(failure_tags, str) else list(failure_tags)
    for i, tag in enumerate(tags):
        if tag not in FAILURE_TAGS:
            problems.append(Problem(f"failure_tags[{i}]", f"{tag!r} is not a failure tag: use {', '.join(FAILURE_TAGS)}"))
    if not isinstance(note, str):
        problems.append(Problem("note", "must be text"))
    elif len(note) > MAX_NOTE_CHARS:
        problems.append(Problem("note", f"is {len(note)} characters; keep it under {MAX_NOTE_CHARS}"))
    if problems:
        raise InvalidInput(problems)
    tags = sorted(set(tags), key=FAILURE_TAGS.index)
    with store.write() as session:
        fetch_row(session, Annotator, annotator_id, "annotator_id")
        step = fetch_row(session, Step, step_id, "step_id")
        rating = session.exec(
            select(Rating).where(Rating.annotator_id == annotator_id, Rating.step_id == step_id)
        ).first()
        if rating is None:
            rating = Rating(annotator_id=annotator_id, step_id=step_id, **scores, failure_tags=tags, note=note)
            step.rating_count += 1
            session.add(step)
        else:
            for name, value in scores.items():
                setattr(rating, name, value)
            rating.failure_tags, rating.note, rating.updated_at = tags, note, utcnow()
        session.add(rating)
        session.flush()
        return rating


def get_rating(store: Store, annotator_id: int, step_id: int) -> Rating | None:
    """This annotator's rating of a step, if any (to show it again for re-rating)."""
    with store.read() as session:
        return session.exec(
            select(Rating).where(Rating.annotator_id == annotator_id, Rating.step_id == step_id)
        ).first()


def annotator_progress(store: Store, annotator_id: int) -> AnnotatorProgress:
    """Rated and skipped counts for an annotator, out of all steps to rate (branch copies excluded)."""
    with store.read() as session:
        fetch_row(session, Annotator, annotator_id, "annotator_id")
        rated = session.exec(
            select(sa.func.count()).select_from(Rating).where(Rating.annotator_id == annotator_id)
        ).one()
        skipped = session.exec(
            select(sa.func.count())
            .select_from(Skip)
            .where(Skip.annotator_id == annotator_id)
            .where(~sa.exists().where(Rating.step_id == Skip.step_id, Rating.annotator_id == annotator_id))
        ).one()
        total = session.exec(
            select(sa.func.count()).select_from(Step).where(Step.copied_from_step_id.is_(None))
        ).one()
    return AnnotatorProgress(rated=rated, skipped=skipped, total=total)


def ratings_for_dimension(store: Store, dimension: str) -> list[RatingValue]:
    """Every score on one dimension (realism, outcome_correctness or training_utility), by step then annotator."""
    if dimension not in RATING_DIMENSIONS:
        raise InvalidInput(Problem("dimension", f"{dimension!r} is not rated: use {', '.join(RATING_DIMENSIONS)}"))
    column = getattr(Rating, dimension)
    query = (
        select(Rating.step_id, Annotator.name, column)
        .join(Annotator, Annotator.id == Rating.annotator_id)
        .order_by(Rating.step_id, Annotator.name)
    )
    with store.read() as session:
        return [RatingValue(step_id, name, value) for step_id, name, value in session.exec(query)]


def list_annotators(store: Store) -> list[Annotator]:
    """All annotators by name."""
    with store.read() as session:
        return list(session.exec(select(Annotator).order_by(Annotator.name)))
