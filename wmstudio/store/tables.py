"""The studio's SQLite tables as SQLModel classes: worlds, rollouts, steps, annotation, curricula, training runs.

The schema itself is owned by the Alembic migrations in `migrations/versions`; a test keeps these classes and the
migrations identical, so a change here without a new revision fails CI instead of a user's database."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    Column,
    ForeignKey,
    Index,
    LargeBinary,
    Text,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

from wmstudio.store.provenance import MadeBy
from wmstudio.world.spec import Call, WorldSpec, parse_world

ROLLOUT_STATUSES = ("pending", "accepted", "rejected")
RUN_STATUSES = ("queued", "running", "finished", "failed", "cancelled")
SCENARIO_SPLITS = ("train", "heldout")
ANNOTATOR_SOURCES = ("local", "hf", "auth")
RATING_DIMENSIONS = ("realism", "outcome_correctness", "training_utility")
FAILURE_TAGS = (
    "numeric type error",
    "unrealistic identifier or key format",
    "error cascade",
    "pagination drift",
    "repetition loop",
    "contradiction",
    "other",
)


def utcnow() -> datetime:
    """Now, timezone-aware in UTC: the store keeps every timestamp in UTC and returns it aware."""
    return datetime.now(UTC)


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{v}'" for v in values)


class World(SQLModel, table=True):
    """One saved version of a world: `text` is the canonical world file (`WorldSpec.dumps()`), never overwritten."""

    __tablename__ = "world"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_world_name_version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str
    version: int
    text: str
    created_at: datetime = Field(default_factory=utcnow)

    def spec(self) -> WorldSpec:
        """The world as a validated WorldSpec."""
        return parse_world(json.loads(self.text), source=f"world {self.name} v{self.version}")


class Rollout(SQLModel, table=True):
    """A trajectory in one world version; a branch names the rollout and step index it was copied from."""

    __tablename__ = "rollout"
    __table_args__ = (
        CheckConstraint(f"status IN ({_quoted(ROLLOUT_STATUSES)})", name="ck_rollout_status"),
        Index("ix_rollout_created", "created_at"),
        Index("ix_rollout_world_created", "world_id", "created_at"),
        Index("ix_rollout_status_created", "status", "created_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    world_id: int = Field(foreign_key="world.id")
    title: str = ""
    status: str = "pending"
    parent_rollout_id: int | None = Field(default=None, foreign_key="rollout.id")
    parent_step_index: int | None = None
    created_at: datetime = Field(default_factory=utcnow)


class RolloutTag(SQLModel, table=True):
    """A free-text tag on a rollout (one row per tag, so filtering by tag uses an index)."""

    __tablename__ = "rollout_tag"
    __table_args__ = (Index("ix_rollout_tag_tag", "tag"),)

    rollout_id: int = Field(foreign_key="rollout.id", primary_key=True)
    tag: str = Field(primary_key=True)


class Step(SQLModel, table=True):
    """One call and its response in a rollout, with how it was made and its check report (decode trace: StepTrace).

    `copied_from_step_id` marks a step copied into a branch (it points at the original): annotators rate the
    original only. `rating_count` is kept by `save_rating` so the annotation queue is one index walk."""

    __tablename__ = "step"
    __table_args__ = (
        UniqueConstraint("rollout_id", "index", name="uq_step_rollout_index"),
        Index("ix_step_queue", "rating_count", "created_at", sqlite_where=text("copied_from_step_id IS NULL")),
        Index("ix_step_rollout_check", "rollout_id", "check_ok"),
    )

    id: int | None = Field(default=None, primary_key=True)
    rollout_id: int = Field(foreign_key="rollout.id")
    index: int
    call: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    response: str
    made_by: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    check_report: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON))
    check_ok: bool | None = None
    copied_from_step_id: int | None = Field(
        default=None, sa_column=Column(ForeignKey("step.id", name="fk_step_copied_from"), nullable=True)
    )
    rating_count: int = 0
    created_at: datetime = Field(default_factory=utcnow)

    def tool_call(self) -> Call:
        """The call as a Call."""
        return Call.from_json(self.call, source=f"step {self.id}.call")

    def provenance(self) -> MadeBy:
        """How the response was made (model run or human edit, with the original kept)."""
        return MadeBy.from_json(self.made_by, source=f"step {self.id}.made_by")


class StepTrace(SQLModel, table=True):
    """A step's packed decode trace (see `trace.py`), kept apart so that scanning steps never reads it."""

    __tablename__ = "step_trace"

    step_id: int = Field(foreign_key="step.id", primary_key=True)
    trace: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class Annotator(SQLModel, table=True):
    """Someone who rates steps: a local name, a Hugging Face user (`hf`) or a user given with `--auth`."""

    __tablename__ = "annotator"
    __table_args__ = (
        UniqueConstraint("name", name="uq_annotator_name"),
        CheckConstraint(f"source IN ({_quoted(ANNOTATOR_SOURCES)})", name="ck_annotator_source"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str
    source: str = "local"
    created_at: datetime = Field(default_factory=utcnow)


class Rating(SQLModel, table=True):
    """An annotator's 1-5 scores for one step plus failure tags and a note; re-rating updates this row."""

    __tablename__ = "rating"
    __table_args__ = (
        UniqueConstraint("annotator_id", "step_id", name="uq_rating_annotator_step"),
        Index("ix_rating_step", "step_id"),
        *(CheckConstraint(f"{d} BETWEEN 1 AND 5", name=f"ck_rating_{d}") for d in RATING_DIMENSIONS),
    )

    id: int | None = Field(default=None, primary_key=True)
    step_id: int = Field(foreign_key="step.id")
    annotator_id: int = Field(foreign_key="annotator.id")
    realism: int
    outcome_correctness: int
    training_utility: int
    failure_tags: list[str] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    note: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Skip(SQLModel, table=True):
    """A step an annotator chose not to rate; it leaves their queue but stays in everyone else's."""

    __tablename__ = "skip"

    annotator_id: int = Field(foreign_key="annotator.id", primary_key=True)
    step_id: int = Field(foreign_key="step.id", primary_key=True)
    created_at: datetime = Field(default_factory=utcnow)


class Curriculum(SQLModel, table=True):
    """One version of a named set of rollouts used for training; a new set of rollouts is a new version."""

    __tablename__ = "curriculum"
    __table_args__ = (UniqueConstraint("name", "version", name="uq_curriculum_name_version"),)

    id: int | None = Field(default=None, primary_key=True)
    name: str
    version: int
    description: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class CurriculumRollout(SQLModel, table=True):
    """Membership of a rollout in a curriculum version, in the order it was given."""

    __tablename__ = "curriculum_rollout"

    curriculum_id: int = Field(foreign_key="curriculum.id", primary_key=True)
    rollout_id: int = Field(foreign_key="rollout.id", primary_key=True)
    position: int
    snapshot: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # the rollout as saved


class CurriculumScenario(SQLModel, table=True):
    """One scenario of a curriculum version: its world (with its own initial state), the agent's task, the anchors
    pinned per tool (steering, anchor text), the success condition in CEL and the target call an expert makes."""

    __tablename__ = "scenario"
    __table_args__ = (
        UniqueConstraint("curriculum_id", "position", name="uq_scenario_curriculum_position"),
        UniqueConstraint("curriculum_id", "key", name="uq_scenario_curriculum_key"),
        CheckConstraint(f"split IN ({_quoted(SCENARIO_SPLITS)})", name="ck_scenario_split"),
    )

    id: int | None = Field(default=None, primary_key=True)
    curriculum_id: int = Field(foreign_key="curriculum.id")
    position: int
    key: str  # "retail-heldout-3", unique in its curriculum version
    split: str
    world: str = Field(sa_column=Column(Text, nullable=False))  # WorldSpec.dumps()
    task: str
    success: str = Field(sa_column=Column(Text, nullable=False))  # CEL over `state` and `trajectory`
    target: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))  # Call.to_json()
    feasible: bool = True
    steering: dict[str, list[str]] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    updated_at: datetime = Field(default_factory=utcnow)

    def spec(self) -> WorldSpec:
        """The scenario's world as a validated WorldSpec."""
        return parse_world(json.loads(self.world), source=f"scenario {self.key}.world")

    def target_call(self) -> Call | None:
        """The target call as a Call (None when the scenario has none)."""
        return None if self.target is None else Call.from_json(self.target, source=f"scenario {self.key}.target")


class DatasetImport(SQLModel, table=True):
    """A dataset file imported as rollouts: its content's SHA-256 and the rollouts it made so far, written in the
    same transaction as each batch of them, and whether it finished: an import retried after a crash goes on from
    where it stopped, and one retried after a lost reply returns its rollouts instead of copies."""

    __tablename__ = "dataset_import"
    __table_args__ = (UniqueConstraint("fingerprint", name="uq_dataset_import_fingerprint"),)

    id: int | None = Field(default=None, primary_key=True)
    fingerprint: str
    rollout_ids: list[int] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    steps: int = 0
    finished: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class TrainingRun(SQLModel, table=True):
    """A background training job on a curriculum version: its config, process, status and log file."""

    __tablename__ = "training_run"
    __table_args__ = (
        CheckConstraint(f"status IN ({_quoted(RUN_STATUSES)})", name="ck_training_run_status"),
        Index("ix_training_run_curriculum", "curriculum_id"),
    )

    id: int | None = Field(default=None, primary_key=True)
    curriculum_id: int = Field(foreign_key="curriculum.id")
    config: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    status: str = "queued"
    pid: int | None = None
    log_path: str | None = None
    error: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None


class RunMetric(SQLModel, table=True):
    """One logged value of a training run (`loss` at step 120 = 0.83)."""

    __tablename__ = "run_metric"
    __table_args__ = (Index("ix_run_metric_run_name_step", "run_id", "name", "step"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="training_run.id")
    step: int
    name: str
    value: float


STORE_TABLES = [t.__table__ for t in (World, Rollout, RolloutTag, Step, StepTrace, Annotator, Rating, Skip, Curriculum,
                                      CurriculumRollout, CurriculumScenario, DatasetImport, TrainingRun,
                                      RunMetric)]
HAND_MADE_TABLE_PREFIXES = ("rollout_text", "step_fts")  # FTS5 search indexes and their tables (0002, 0003)


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's filter when comparing these classes with a database: skip the hand-made search tables."""
    return not (type_ == "table" and name is not None and name.startswith(HAND_MADE_TABLE_PREFIXES))
