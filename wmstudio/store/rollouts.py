"""Rollouts and their steps: create, append, branch from a step, hand-edit a response, accept/reject and tag.

Each function is one short write transaction, so the studio and a training process can share the file."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, select

from wmstudio.model.denoising.trace import DecodeTrace
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import whole_in
from wmstudio.store.database import Store, fetch_row
from wmstudio.store.provenance import MadeBy
from wmstudio.store.tables import (
    ROLLOUT_STATUSES,
    Rollout,
    RolloutTag,
    Step,
    StepTrace,
    World,
    utcnow,
)
from wmstudio.store.trace import pack_trace, unpack_trace
from wmstudio.world.checks.report import CheckReport
from wmstudio.world.input_limits import find_lone_surrogate, surrogate_message
from wmstudio.world.spec import Call

MAX_TAG_CHARS = 64
MAX_TITLE_CHARS = 200


def create_rollout(store: Store, world_id: int, title: str = "", tags: Iterable[str] = (),
                   status: str = "pending") -> Rollout:
    """Start an empty rollout in a saved world version."""
    title, status, clean_tags = _title(title), _status(status), _tags(tags)
    with store.write() as session:
        fetch_row(session, World, world_id, "world_id")
        rollout = Rollout(world_id=world_id, title=title, status=status)
        session.add(rollout)
        session.flush()
        session.add_all(RolloutTag(rollout_id=rollout.id, tag=tag) for tag in clean_tags)
        return rollout


def append_step(
    store: Store,
    rollout_id: int,
    call: Call,
    response: str,
    made_by: MadeBy,
    check_report: CheckReport | dict[str, Any] | None = None,
    trace: DecodeTrace | None = None,
) -> Step:
    """Add the next step (call, response, provenance, check report, decode trace) at the end of a rollout; an
    accepted rollout goes back to pending (it is no longer what was accepted)."""
    fields = _step_fields(call, response, made_by, check_report)
    packed = pack_trace(trace) if trace is not None else None
    with store.write() as session:
        fetch_row(session, Rollout, rollout_id, "rollout_id")
        _unaccept(session, rollout_id)
        last = session.exec(select(sa.func.max(Step.index)).where(Step.rollout_id == rollout_id)).one()
        step = Step(rollout_id=rollout_id, index=0 if last is None else last + 1, **fields)
        session.add(step)
        session.flush()
        if packed is not None:
            session.add(StepTrace(step_id=step.id, trace=packed))
        return step


def get_rollout(store: Store, rollout_id: int) -> Rollout:
    """The rollout with this id; InvalidInput when there is none."""
    with store.read() as session:
        return fetch_row(session, Rollout, rollout_id, "rollout_id")


def rollout_steps(store: Store, rollout_id: int) -> list[Step]:
    """The steps of a rollout in order."""
    with store.read() as session:
        fetch_row(session, Rollout, rollout_id, "rollout_id")
        return list(session.exec(select(Step).where(Step.rollout_id == rollout_id).order_by(Step.index)))


def get_step(store: Store, step_id: int) -> Step:
    """The step with this id; InvalidInput when there is none."""
    with store.read() as session:
        return fetch_row(session, Step, step_id, "step_id")


def step_trace(store: Store, step_id: int) -> DecodeTrace:
    """The decode trace of a step (empty when none was saved, e.g. for a response typed by hand)."""
    with store.read() as session:
        fetch_row(session, Step, step_id, "step_id")
        row = session.get(StepTrace, step_id)
    return unpack_trace(row.trace) if row is not None else DecodeTrace()


def branch_rollout(store: Store, rollout_id: int, step_index: int, title: str | None = None) -> Rollout:
    """A new rollout holding copies of steps 0..`step_index` of `rollout_id`, linked to where it branched.

    Copies point at the step they copy (`copied_from_step_id`, always the first original), so annotators rate
    each response once; the new rollout starts pending with the parent's tags."""
    with store.write() as session:
        parent = fetch_row(session, Rollout, rollout_id, "rollout_id")
        count = _count(session, rollout_id)
        if not whole_in(step_index, 0, count - 1):
            have = f"steps 0..{count - 1}" if count else "no steps"
            raise InvalidInput(Problem("step_index", f"rollout {rollout_id} has {have}; got {step_index!r}: "
                                                     "branch from a step it has"))
        steps = list(session.exec(
            select(Step).where(Step.rollout_id == rollout_id, Step.index <= step_index).order_by(Step.index)
        ))
        branch = Rollout(
            world_id=parent.world_id,
            title=_title(title) if title is not None else _branch_title(parent, step_index),
            parent_rollout_id=parent.id,
            parent_step_index=step_index,
        )
        session.add(branch)
        session.flush()
        tags = session.exec(select(RolloutTag.tag).where(RolloutTag.rollout_id == rollout_id)).all()
        session.add_all(RolloutTag(rollout_id=branch.id, tag=tag) for tag in tags)
        session.add_all(
            Step(
                rollout_id=branch.id,
                index=step.index,
                call=step.call,
                response=step.response,
                made_by=step.made_by,
                check_report=step.check_report,
                check_ok=step.check_ok,
                copied_from_step_id=step.copied_from_step_id or step.id,
            )
            for step in steps
        )
        session.flush()
        session.execute(  # the copies' decode traces, copied inside the database
            sa.insert(StepTrace).from_select(
                ["step_id", "trace"],
                select(Step.id, StepTrace.trace)
                .join(StepTrace, StepTrace.step_id == Step.copied_from_step_id)
                .where(Step.rollout_id == branch.id),
            )
        )
        return branch


def edit_step_response(store: Store, step_id: int, response: str, editor: str | None = None,
                       check_report: CheckReport | dict[str, Any] | None = None) -> Step:
    """Replace a step's response by hand; recorded as a human edit that keeps the original response.

    Give the check report of the new text (None marks the step unchecked). An edited copy in a branch is no
    longer a copy, so it enters the annotation queue in its own right. An accepted rollout goes back to pending:
    what was accepted is not what it holds now (curriculum versions keep what they saved)."""
    response = _response(response)
    report, ok = _report(check_report)
    with store.write() as session:
        step = fetch_row(session, Step, step_id, "step_id")
        if response == step.response:
            return step
        step.made_by = MadeBy.from_json(step.made_by, f"step {step_id}.made_by").edited(step.response, editor).to_json()
        step.response = response
        step.check_report, step.check_ok = report, ok
        step.copied_from_step_id = None
        session.add(step)
        _unaccept(session, step.rollout_id)
        return step


def _unaccept(session, rollout_id: int) -> None:
    rollout = session.get(Rollout, rollout_id)
    if rollout is not None and rollout.status == "accepted":
        rollout.status = "pending"
        session.add(rollout)


def set_status(store: Store, rollout_id: int, status: str) -> Rollout:
    """Mark a rollout pending, accepted or rejected."""
    status = _status(status)
    with store.write() as session:
        rollout = fetch_row(session, Rollout, rollout_id, "rollout_id")
        rollout.status = status
        session.add(rollout)
        return rollout


def set_tags(store: Store, rollout_id: int, tags: Iterable[str]) -> list[str]:
    """Replace a rollout's tags (trimmed, duplicates dropped); returns them sorted."""
    clean = _tags(tags)
    with store.write() as session:
        fetch_row(session, Rollout, rollout_id, "rollout_id")
        session.exec(sa.delete(RolloutTag).where(RolloutTag.rollout_id == rollout_id))
        session.add_all(RolloutTag(rollout_id=rollout_id, tag=tag) for tag in clean)
    return sorted(clean)


def rollout_tags(store: Store, rollout_id: int) -> list[str]:
    """A rollout's tags, sorted."""
    with store.read() as session:
        return sorted(session.exec(select(RolloutTag.tag).where(RolloutTag.rollout_id == rollout_id)).all())


def _branch_title(parent: Rollout, step_index: int) -> str:
    suffix = f" (branch at step {step_index})"
    return (parent.title or f"rollout {parent.id}")[: MAX_TITLE_CHARS - len(suffix)] + suffix


def _count(session: Session, rollout_id: int) -> int:
    return session.exec(select(sa.func.count()).select_from(Step).where(Step.rollout_id == rollout_id)).one()


def _step_fields(call: Any, response: Any, made_by: Any, check_report: Any) -> dict[str, Any]:
    """Validate a step's parts once, before the write lock is taken."""
    if not isinstance(call, Call):
        raise InvalidInput(Problem("call", "must be a parsed call (Call.from_json reads one)"))
    the_call = call
    try:
        json.dumps(the_call.arguments)
    except (TypeError, ValueError):
        raise InvalidInput(Problem("call.arguments", "must hold JSON values only (text, numbers, lists, objects)"))
    if (found := find_lone_surrogate(the_call.arguments, "call.arguments")) is not None:
        raise InvalidInput(Problem(found[0], surrogate_message(found[1])))
    if not isinstance(made_by, MadeBy):
        raise InvalidInput(Problem("made_by", "expected a MadeBy (MadeBy.by_model(...) or MadeBy.by_hand(...))"))
    report, ok = _report(check_report)
    return {
        "call": the_call.to_json(),
        "response": _response(response),
        "made_by": made_by.to_json(),
        "check_report": report,
        "check_ok": ok,
        "created_at": utcnow(),
    }


def _response(response: Any) -> str:
    if not isinstance(response, str):
        raise InvalidInput(Problem("response", f"must be the response text, got {type(response).__name__}: "
                                               "serialise a JSON value with json.dumps first"))
    _refuse_surrogate(response, "response")
    return response


def _refuse_surrogate(text: str, field: str) -> None:
    """A lone surrogate cannot be written to the database (it is not UTF-8): say so instead of failing there."""
    if find_lone_surrogate(text) is not None:
        raise InvalidInput(Problem(field, surrogate_message(text)))


def _report(check_report: Any) -> tuple[dict[str, Any] | None, bool | None]:
    if check_report is None:
        return None, None
    report = check_report.to_json() if isinstance(check_report, CheckReport) else check_report
    if not isinstance(report, dict) or not isinstance(report.get("ok"), bool):
        raise InvalidInput(Problem("check_report", 'expected a CheckReport or its to_json() dict with "ok"'))
    return report, report["ok"]


def _status(status: Any) -> str:
    if status not in ROLLOUT_STATUSES:
        raise InvalidInput(Problem("status", f"{status!r} is not a status: use {', '.join(ROLLOUT_STATUSES)}"))
    return status


def _title(title: Any) -> str:
    if not isinstance(title, str):
        raise InvalidInput(Problem("title", "must be text"))
    title = title.strip()
    _refuse_surrogate(title, "title")
    if len(title) > MAX_TITLE_CHARS:
        raise InvalidInput(Problem("title", f"is {len(title)} characters; keep it under {MAX_TITLE_CHARS}"))
    return title


def _tags(tags: Iterable[str]) -> list[str]:
    if isinstance(tags, str):
        tags = [part for part in tags.split(",")]
    clean: list[str] = []
    for i, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise InvalidInput(Problem(f"tags[{i}]", "must be text"))
        tag = tag.strip()
        _refuse_surrogate(tag, f"tags[{i}]")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidInput(Problem(f"tags[{i}]", f"is {len(tag)} characters; keep tags under {MAX_TAG_CHARS}"))
        if tag and tag not in clean:
            clean.append(tag)
    return clean
