"""The studio store on real SQLite files: migrations, worlds, rollouts and branches, search, annotation, curricula, runs.

Every test opens a database file the way the app does (`open_store`) and checks what a user of the studio sees."""

import json
import pickle
import shutil
import sqlite3
import struct
from contextlib import closing

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from wmstudio.model.denoising.trace import Commit, DecodeTrace
from wmstudio.problems import InvalidInput
from wmstudio.store import (
    FAILURE_TAGS,
    MadeBy,
    add_metrics,
    annotator_progress,
    append_step,
    branch_rollout,
    create_curriculum_version,
    create_rollout,
    create_run,
    curriculum_rollouts,
    curriculum_snapshots,
    default_db_path,
    edit_step_response,
    filter_rollouts,
    get_annotator,
    get_curriculum,
    get_rating,
    get_rollout,
    get_world,
    latest_world,
    list_curricula,
    list_runs,
    list_worlds,
    next_to_annotate,
    open_store,
    pack_trace,
    ratings_for_dimension,
    refresh_search_index,
    rollout_steps,
    rollout_tags,
    run_metrics,
    save_rating,
    save_world_version,
    set_status,
    set_tags,
    skip_step,
    step_trace,
    unpack_trace,
    update_run,
    world_versions,
)
from wmstudio.store.database import current_revision, head_revision, upgrade_database
from wmstudio.store.tables import STORE_TABLES, include_object
from wmstudio.store.text_index import STALE_BATCH
from wmstudio.world.checks.report import CheckReport
from wmstudio.world.spec import Call, parse_world

SHOP = {
    "name": "shop",
    "task": "Refund order A1 if it was not delivered.",
    "initial_state": {"orders": {"A1": {"status": "lost", "amount": 12.5}}},
    "tools": [{"type": "function", "function": {
        "name": "refund_order", "description": "Refund an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}}],
    "rules": [{"text": "Refunds never exceed the order amount.", "check": "response.amount <= 12.5"}],
}
MODEL = MadeBy.by_model("wmstudio-tiny", {"steps": 12, "strategy": "low_confidence"}, seed=7,
                        anchors=[{"path": "status", "value": "error"}])
OK = {"ok": True, "json_valid": True, "schema_errors": [], "rule_violations": [], "anchor_violations": []}
FAILED = {**OK, "ok": False, "rule_violations": [{"rule": "Refunds never exceed the order amount.", "message": "no"}]}


def call(order="A1", tool="refund_order"):
    return Call(tool, {"order_id": order})


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory):
    """A database file at the newest revision, made once; each test opens its own copy."""
    path = tmp_path_factory.mktemp("template") / "studio.db"
    open_store(path).close()
    return path


@pytest.fixture
def store(migrated_template, tmp_path):
    path = tmp_path / "studio.db"
    shutil.copy(migrated_template, path)
    opened = open_store(path)
    yield opened
    opened.close()


@pytest.fixture
def world(store):
    return save_world_version(store, parse_world(SHOP))


def sqlite_rows(path, sql):
    with closing(sqlite3.connect(path)) as connection:
        return connection.execute(sql).fetchall()


# --- opening, settings and migrations ---------------------------------------------------------------------------


def test_a_new_file_is_migrated_to_head_and_every_connection_is_set_up_for_sharing(tmp_path):
    store = open_store(tmp_path / "new" / "studio.db")
    assert current_revision(store.path) == head_revision()
    with store.read() as session:
        settings = {name: session.execute(sa.text(f"PRAGMA {name}")).scalar()
                    for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")}
    assert settings == {"journal_mode": "wal", "foreign_keys": 1, "busy_timeout": 10000, "synchronous": 1}
    assert open_store(store.path) is store  # one Store (one engine) per file in a process
    assert sorted(p.name for p in store.path.parent.iterdir() if ".bak" in p.name) == []


def test_opening_a_replaced_file_uses_the_new_file(tmp_path):
    path = tmp_path / "studio.db"
    store = open_store(path)
    save_world_version(store, parse_world(SHOP))
    for leftover in tmp_path.glob("studio.db*"):  # the user deletes the database while the app runs
        leftover.unlink()
    reopened = open_store(path)
    assert list_worlds(reopened) == []
    save_world_version(reopened, parse_world({"name": "bank"}))
    assert sqlite_rows(path, "SELECT name FROM world") == [("bank",)]


def test_an_empty_file_is_a_new_database(tmp_path):
    path = tmp_path / "studio.db"
    path.touch()
    store = open_store(path)
    assert current_revision(path) == head_revision()
    assert list_worlds(store) == []


def test_the_migrations_create_exactly_the_tables_the_code_uses(store):
    with store.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_object": include_object,
                                                               "compare_type": True})
        assert compare_metadata(context, STORE_TABLES[0].metadata) == []


@pytest.mark.parametrize("first", ["0001", "0002"], ids=["first revision", "per-step search index"])
def test_rows_written_at_an_earlier_revision_survive_the_upgrade_and_become_searchable(tmp_path, first):
    path = tmp_path / "studio.db"
    upgrade_database(path, first)
    assert current_revision(path) == first
    world_text = parse_world(SHOP).dumps()
    made_by = json.dumps(MODEL.to_json())
    with closing(sqlite3.connect(path)) as connection, connection:  # what a first-release studio wrote
        connection.execute("INSERT INTO world VALUES (1, 'shop', 1, ?, '2026-01-01 10:00:00.000000')", (world_text,))
        connection.execute("INSERT INTO rollout VALUES (1, 1, 'old one', 'accepted', NULL, NULL, "
                           "'2026-01-01 10:00:01.000000')")
        connection.execute("INSERT INTO rollout_tag VALUES (1, 'legacy')")
        connection.execute('INSERT INTO step (id, rollout_id, "index", call, response, made_by, check_report, '
                           "check_ok, copied_from_step_id, rating_count, created_at) VALUES (1, 1, 0, ?, ?, ?, ?, "
                           "1, NULL, 1, '2026-01-01 10:00:02.000000')",
                           (json.dumps(call("Z9").to_json()), '{"status": "refunded_legacy"}', made_by, json.dumps(OK)))
        connection.execute("INSERT INTO step_trace VALUES (1, ?)", (pack_trace(DecodeTrace([Commit(0, 0, 0.25)])),))
        connection.execute("INSERT INTO annotator VALUES (1, 'ada', 'local', '2026-01-01 10:00:03.000000')")
        connection.execute("INSERT INTO rating (step_id, annotator_id, realism, outcome_correctness, "
                           "training_utility, failure_tags, note, created_at, updated_at) VALUES (1, 1, 4, 3, 5, "
                           "'[\"other\"]', 'kept', '2026-01-01 10:00:04.000000', '2026-01-01 10:00:04.000000')")

    store = open_store(path)

    assert current_revision(path) == head_revision()
    assert get_world(store, 1).spec().dumps() == world_text
    [step] = rollout_steps(store, 1)
    assert (step.response, step.tool_call(), step.provenance()) == ('{"status": "refunded_legacy"}',
                                                                   Call("refund_order", {"order_id": "Z9"}), MODEL)
    assert step_trace(store, 1) == DecodeTrace([Commit(0, 0, 0.25)])
    assert rollout_tags(store, 1) == ["legacy"]
    assert ratings_for_dimension(store, "training_utility")[0].value == 5
    assert [r.id for r in filter_rollouts(store, text="refunded_legacy").items] == [1]  # indexed by the upgrade
    newer = append_step(store, 1, call("Q7"), '{"status": "fresh"}', MODEL)
    assert newer.index == 1 and filter_rollouts(store, text="fresh").total == 1
    backups = [p for p in tmp_path.iterdir() if p.name.startswith("studio.db.before-")]
    assert len(backups) == 1 and sqlite_rows(backups[0], "SELECT version_num FROM alembic_version") == [(first,)]
    assert sqlite_rows(path, "SELECT name FROM sqlite_master WHERE name = 'step_fts'") == []  # replaced by 0003


def test_files_that_are_not_studio_databases_are_refused_with_the_fix(tmp_path):
    with pytest.raises(InvalidInput, match="is a folder"):
        open_store(tmp_path)
    text_file = tmp_path / "notes.db"
    text_file.write_text("hello, I am not a database\n")
    with pytest.raises(InvalidInput, match="not a SQLite database"):
        open_store(text_file)
    assert text_file.read_text() == "hello, I am not a database\n"
    foreign = tmp_path / "other.db"
    with closing(sqlite3.connect(foreign)) as connection:
        connection.execute("CREATE TABLE customers (id INTEGER)")
    with pytest.raises(InvalidInput, match=r"holds tables \(customers\) but is not a wmstudio database"):
        open_store(foreign)
    newer = tmp_path / "newer.db"
    open_store(newer).close()
    with closing(sqlite3.connect(newer)) as connection, connection:
        connection.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(InvalidInput, match="written by a newer wmstudio") as err:
        open_store(newer)
    assert err.value.problems[0].path == "db"


def test_the_default_path_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_DB", str(tmp_path / "chosen.db"))
    assert default_db_path() == tmp_path / "chosen.db"
    monkeypatch.delenv("WMSTUDIO_DB")
    monkeypatch.setenv("WMSTUDIO_HOME", str(tmp_path / "home"))
    assert default_db_path() == tmp_path / "home" / "studio.db"


def test_a_store_survives_pickling_into_a_worker(store, world):
    clone = pickle.loads(pickle.dumps(store))
    assert clone.path == store.path and list_worlds(clone)[0].latest.id == world.id


# --- worlds -------------------------------------------------------------------------------------------------------


def test_saving_a_world_creates_versions_and_never_overwrites(store, world):
    assert (world.name, world.version) == ("shop", 1)
    assert save_world_version(store, parse_world(SHOP)).id == world.id  # unchanged: same version
    changed = save_world_version(store, parse_world({**SHOP, "task": "Refund A1 twice."}))
    save_world_version(store, parse_world({"name": "bank"}))
    assert changed.version == 2
    assert [w.version for w in world_versions(store, "shop")] == [2, 1]
    assert get_world(store, world.id).spec().task == SHOP["task"]
    assert [(s.name, s.latest.version, s.versions) for s in list_worlds(store)] == [("bank", 1, 1), ("shop", 2, 2)]
    assert latest_world(store, "shop").id == changed.id and latest_world(store, "nowhere") is None
    with pytest.raises(InvalidInput, match="no world with id 999"):
        get_world(store, 999)
    with pytest.raises(InvalidInput, match="expected a WorldSpec"):
        save_world_version(store, SHOP)


# --- rollouts and steps -------------------------------------------------------------------------------------------


def test_steps_keep_call_response_provenance_report_and_trace(store, world):
    rollout = create_rollout(store, world.id, "refund path", tags=["happy", "happy", " refunds "])
    report = CheckReport(ok=True, json_valid=True)
    first = append_step(store, rollout.id, Call("refund_order", {"order_id": "A1"}), '{"amount": 12.5}', MODEL,
                        check_report=report, trace=DecodeTrace([Commit(3, 0, 0.9), Commit(1, 2, 0.5)]))
    second = append_step(store, rollout.id, call("A2"), "not json", MadeBy.by_hand("ada"))
    assert (first.index, second.index) == (0, 1)
    steps = rollout_steps(store, rollout.id)
    assert [s.response for s in steps] == ['{"amount": 12.5}', "not json"]
    assert steps[0].provenance() == MODEL and steps[1].provenance().kind == "human"
    assert (steps[0].check_report, steps[0].check_ok, steps[1].check_ok) == (report.to_json(), True, None)
    assert step_trace(store, first.id) == DecodeTrace([Commit(3, 0, 0.8999999761581421), Commit(1, 2, 0.5)])
    assert step_trace(store, second.id) == DecodeTrace()
    assert rollout_tags(store, rollout.id) == ["happy", "refunds"]


def test_bad_step_input_is_named(store, world):
    rollout = create_rollout(store, world.id)
    with pytest.raises(InvalidInput, match=r"call: must be a parsed call"):
        append_step(store, rollout.id, {"arguments": {}}, "{}", MODEL)
    with pytest.raises(InvalidInput, match="response: must be the response text"):
        append_step(store, rollout.id, call(), {"amount": 1}, MODEL)
    with pytest.raises(InvalidInput, match=r"trace\[1\]\.position"):  # traces are read where they come in
        DecodeTrace.from_json([[0, 0, 0.5], [-1, 0, 0.5]])
    with pytest.raises(InvalidInput, match="check_report"):
        append_step(store, rollout.id, call(), "{}", MODEL, check_report={"fine": "yes"})
    with pytest.raises(InvalidInput, match="no rollout with id 404"):
        append_step(store, 404, call(), "{}", MODEL)
    with pytest.raises(InvalidInput, match="'done' is not a status"):
        set_status(store, rollout.id, "done")
    assert rollout_steps(store, rollout.id) == []


def test_a_branch_copies_steps_up_to_k_and_remembers_where_it_came_from(store, world):
    parent = create_rollout(store, world.id, "main", tags=["adversarial"])
    steps = [append_step(store, parent.id, call(f"A{i}"), f'{{"n": {i}}}', MODEL, check_report=OK,
                         trace=DecodeTrace([Commit(i, 0, 0.5)])) for i in range(4)]
    branch = branch_rollout(store, parent.id, 1)
    assert (branch.parent_rollout_id, branch.parent_step_index, branch.world_id) == (parent.id, 1, world.id)
    assert branch.title == "main (branch at step 1)" and branch.status == "pending"
    copies = rollout_steps(store, branch.id)
    assert [(s.index, s.response, s.copied_from_step_id) for s in copies] == [
        (0, '{"n": 0}', steps[0].id), (1, '{"n": 1}', steps[1].id)]
    assert step_trace(store, copies[1].id) == DecodeTrace([Commit(1, 0, 0.5)])
    assert rollout_tags(store, branch.id) == ["adversarial"]
    again = branch_rollout(store, branch.id, 0, title="deeper")
    assert rollout_steps(store, again.id)[0].copied_from_step_id == steps[0].id  # always the first original
    assert len(rollout_steps(store, parent.id)) == 4  # the parent is untouched
    with pytest.raises(InvalidInput, match=r"step_index: rollout \d+ has steps 0\.\.3; got 4"):
        branch_rollout(store, parent.id, 4)


def test_a_hand_edit_is_recorded_and_the_original_is_kept(store, world):
    rollout = create_rollout(store, world.id)
    step = append_step(store, rollout.id, call(), '{"amount": 99}', MODEL, check_report=FAILED)
    edited = edit_step_response(store, step.id, '{"amount": 12.5}', editor="ada", check_report=OK)
    twice = edit_step_response(store, step.id, '{"amount": 12}', editor="bob")
    [stored] = rollout_steps(store, rollout.id)
    assert edited.check_ok is True and stored.response == '{"amount": 12}' and stored.check_ok is None
    made_by = stored.provenance()
    assert (made_by.kind, made_by.editor, made_by.original_response, made_by.original) == (
        "human edit", "bob", '{"amount": 99}', MODEL)
    assert twice.made_by == stored.made_by
    assert filter_rollouts(store, text='"amount": 99').total == 0  # search sees the current text only


def test_status_and_tags_can_be_changed(store, world):
    rollout = create_rollout(store, world.id)
    assert set_status(store, rollout.id, "accepted").status == "accepted"
    assert get_rollout(store, rollout.id).status == "accepted"
    assert set_tags(store, rollout.id, "b, a ,,a") == ["a", "b"]
    assert set_tags(store, rollout.id, []) == [] and rollout_tags(store, rollout.id) == []
    with pytest.raises(InvalidInput, match=r"tags\[0\]: is 65 characters"):
        set_tags(store, rollout.id, ["x" * 65])


# --- filtering ----------------------------------------------------------------------------------------------------


@pytest.fixture
def catalogue(store, world):
    """Six rollouts in two worlds with statuses, tags, check verdicts and texts to find."""
    bank = save_world_version(store, parse_world({"name": "bank"}))
    shop_v2 = save_world_version(store, parse_world({**SHOP, "task": "v2"}))
    specs = [  # (world, title, status, tags, [(order, response, report)])
        (world, "refund lost parcel", "accepted", ["refunds"], [("A1", '{"status": "refunded"}', OK)]),
        (world, "double refund", "rejected", ["refunds", "adversarial"],
         [("A1", '{"status": "refunded"}', OK), ("A1", '{"error": "Already_Refunded"}', FAILED)]),
        (shop_v2, "unchecked", "pending", [], [("B7", '{"note": "Café crème"}', None)]),
        (bank, "transfer", "accepted", ["adversarial"], [("T1", '{"status": "100%_done"}', OK)]),
        (bank, "empty", "pending", [], []),
        (bank, "pagination", "pending", ["pagination"], [("P1", '{"page": 2, "say": "he said \\"hi\\""}', FAILED)]),
    ]
    ids = {}
    for spec_world, title, status, tags, steps in specs:
        rollout = create_rollout(store, spec_world.id, title, tags=tags)
        for order, response, report in steps:
            append_step(store, rollout.id, call(order), response, MODEL, check_report=report)
        set_status(store, rollout.id, status)  # after the steps: a step appended to an accepted rollout un-accepts it
        ids[title] = rollout.id
    return ids


def titles(page):
    return [item.title for item in page.items]


def test_filters_find_rollouts_by_world_status_tag_and_checks(store, catalogue):
    everything = filter_rollouts(store)
    assert titles(everything) == ["pagination", "empty", "transfer", "unchecked", "double refund",
                                  "refund lost parcel"]  # newest first
    assert everything.total == 6 and everything.status_counts == {"pending": 3, "accepted": 2, "rejected": 1}
    assert titles(filter_rollouts(store, world="shop")) == ["unchecked", "double refund", "refund lost parcel"]
    v1 = filter_rollouts(store, world="shop").items[-1].world_id
    assert titles(filter_rollouts(store, world_id=v1)) == ["double refund", "refund lost parcel"]
    accepted = filter_rollouts(store, status="accepted")
    assert titles(accepted) == ["transfer", "refund lost parcel"] and accepted.total == 2
    assert accepted.status_counts["pending"] == 3  # counts per status ignore the status filter itself
    assert titles(filter_rollouts(store, tag="adversarial")) == ["transfer", "double refund"]
    assert titles(filter_rollouts(store, check_ok=False)) == ["pagination", "double refund"]
    assert titles(filter_rollouts(store, check_ok=True)) == ["transfer", "refund lost parcel"]  # all checked
    assert titles(filter_rollouts(store, world="bank", status="pending", check_ok=False)) == ["pagination"]
    assert filter_rollouts(store, world="nowhere").total == 0


def test_summaries_carry_counts_tags_and_world_version(store, catalogue):
    [double] = filter_rollouts(store, tag="refunds", status="rejected").items
    assert (double.world_name, double.world_version, double.step_count, double.failed_steps) == ("shop", 1, 2, 1)
    assert double.tags == ["adversarial", "refunds"]
    [empty] = filter_rollouts(store, text="empty").items
    assert (empty.step_count, empty.failed_steps, empty.tags) == (0, 0, [])


@pytest.mark.parametrize("indexed", [True, False], ids=["from the index", "changed since indexed"])
def test_text_search_looks_in_calls_responses_and_titles_ignoring_case(store, catalogue, indexed):
    if indexed:
        assert refresh_search_index(store) == len(catalogue)
    assert titles(filter_rollouts(store, text="already_refunded")) == ["double refund"]
    assert titles(filter_rollouts(store, text="REFUNDED")) == ["double refund", "refund lost parcel"]
    assert titles(filter_rollouts(store, text="café")) == ["unchecked"]
    assert titles(filter_rollouts(store, text='"order_id": "T1"')) == ["transfer"]  # inside the call JSON
    assert titles(filter_rollouts(store, text="lost parcel")) == ["refund lost parcel"]  # the title
    assert titles(filter_rollouts(store, text='\\"hi\\"')) == ["pagination"]  # quotes are plain text
    assert titles(filter_rollouts(store, text="0%_")) == ["transfer"]  # % and _ are not wildcards
    assert titles(filter_rollouts(store, text="%")) == ["transfer"]  # short text is scanned, not indexed
    assert titles(filter_rollouts(store, text="P1")) == ["pagination"]
    assert filter_rollouts(store, text="nothing like this").total == 0
    assert titles(filter_rollouts(store, text="refunded", tag="adversarial", check_ok=False)) == ["double refund"]


def test_text_search_is_exact_before_and_after_the_index_catches_up(store, world):
    rollouts = [create_rollout(store, world.id, f"r{i}") for i in range(STALE_BATCH)]
    step = append_step(store, rollouts[0].id, call(), '{"colour": "teal"}', MODEL)
    assert refresh_search_index(store) == STALE_BATCH and stale_rollouts(store) == 0
    edit_step_response(store, step.id, '{"colour": "maroon"}')
    append_step(store, rollouts[1].id, call(), '{"colour": "maroon"}', MODEL)
    assert stale_rollouts(store) == 2  # changed since indexed: read directly, not from the index
    assert titles(filter_rollouts(store, text="teal")) == []
    assert titles(filter_rollouts(store, text="MAROON")) == ["r1", "r0"]
    assert titles(filter_rollouts(store, text="n\"")) == ["r1", "r0"]  # short text: scanned in both places
    for rollout in rollouts[2:]:
        set_tags(store, rollout.id, ["x"])  # tags are not text: nothing to re-index
        append_step(store, rollout.id, call(), "{}", MODEL)
    assert stale_rollouts(store) == STALE_BATCH
    assert titles(filter_rollouts(store, text="maroon")) == ["r1", "r0"]  # searched after a batch re-index
    assert stale_rollouts(store) == 0


def stale_rollouts(store):
    return sqlite_rows(store.path, "SELECT count(*) FROM rollout_text_stale")[0][0]


def test_pages_split_the_newest_first_order(store, catalogue):
    pages = [filter_rollouts(store, page=n, page_size=4) for n in (1, 2, 3)]
    assert [titles(p) for p in pages] == [["pagination", "empty", "transfer", "unchecked"],
                                          ["double refund", "refund lost parcel"], []]
    assert (pages[0].total, pages[0].pages) == (6, 2)
    for bad in ({"page": 0}, {"page_size": 0}, {"page_size": 10_000}, {"status": "done"}, {"text": 5}):
        with pytest.raises(InvalidInput):
            filter_rollouts(store, **bad)


# --- annotation ---------------------------------------------------------------------------------------------------


def test_the_queue_overlaps_annotators_before_new_steps_then_newest_and_respects_skips(store, world):
    s2, s1, s0 = (append_step(store, create_rollout(store, world.id).id, call(f"A{i}"), f'{{"i": {i}}}', MODEL)
                  for i in range(3))  # three rollouts, the last saved last
    ada, bob, cy = (get_annotator(store, name) for name in ("ada", "bob", "cy"))
    assert next_to_annotate(store, ada.id).step_id == s0.id  # all unrated: the newest (the one just saved)
    save_rating(store, ada.id, s0.id, 4, 4, 4)
    assert next_to_annotate(store, bob.id).step_id == s0.id  # rated once: a second rating before new steps
    assert next_to_annotate(store, bob.id, overlap=1).step_id == s1.id  # no overlap asked: the least rated
    save_rating(store, bob.id, s0.id, 3, 3, 3)
    assert next_to_annotate(store, cy.id).step_id == s1.id  # s0 has its two ratings: on to the newest unrated
    skip_step(store, cy.id, s1.id)
    assert next_to_annotate(store, cy.id).step_id == s2.id  # skipped for cy only
    assert next_to_annotate(store, ada.id).step_id == s1.id
    save_rating(store, bob.id, s1.id, 3, 3, 3)
    with pytest.raises(InvalidInput, match="overlap"):
        next_to_annotate(store, ada.id, overlap=0)
    for step in (s1, s2):
        save_rating(store, ada.id, step.id, 5, 5, 5)
    assert next_to_annotate(store, ada.id) is None
    assert annotator_progress(store, ada.id).remaining == 0
    progress = annotator_progress(store, cy.id)
    assert (progress.rated, progress.skipped, progress.total, progress.remaining) == (0, 1, 3, 2)


def test_an_item_shows_the_world_history_and_response_but_not_the_model(store, world):
    rollout = create_rollout(store, world.id)
    append_step(store, rollout.id, call("A1"), '{"status": "lost"}', MODEL)
    second = append_step(store, rollout.id, call("A2"), '{"amount": 12.5}', MODEL)
    ada = get_annotator(store, "ada")
    save_rating(store, get_annotator(store, "bob").id, rollout_steps(store, rollout.id)[0].id, 3, 3, 3)
    item = next_to_annotate(store, ada.id, overlap=1)
    assert (item.step_id, item.step_index, item.world_id) == (second.id, 1, world.id)
    assert [(h.call, h.response) for h in item.history] == [(Call("refund_order", {"order_id": "A1"}),
                                                             '{"status": "lost"}')]
    assert (item.call, item.response) == (Call("refund_order", {"order_id": "A2"}), '{"amount": 12.5}')
    assert "wmstudio-tiny" not in repr(item)


def test_branch_copies_are_not_rated_twice_but_an_edited_copy_is(store, world):
    rollout = create_rollout(store, world.id)
    original = append_step(store, rollout.id, call(), "{}", MODEL)
    branch = branch_rollout(store, rollout.id, 0)
    ada = get_annotator(store, "ada")
    save_rating(store, ada.id, original.id, 2, 2, 2)
    assert next_to_annotate(store, ada.id) is None and annotator_progress(store, ada.id).total == 1
    [copy] = rollout_steps(store, branch.id)
    edit_step_response(store, copy.id, '{"edited": true}', editor="ada")
    assert next_to_annotate(store, ada.id).step_id == copy.id


def test_rating_again_updates_and_scores_tags_and_notes_are_checked(store, world):
    rollout = create_rollout(store, world.id)
    step = append_step(store, rollout.id, call(), "{}", MODEL)
    ada = get_annotator(store, "ada", source="hf")
    assert get_annotator(store, " ada ").id == ada.id and ada.source == "hf"
    save_rating(store, ada.id, step.id, 2, 3, 4, ["numeric type error"], note="amount is a string")
    save_rating(store, ada.id, step.id, 5, 4, 3, ["repetition loop", "error cascade", "error cascade"])
    rating = get_rating(store, ada.id, step.id)
    assert (rating.realism, rating.outcome_correctness, rating.training_utility) == (5, 4, 3)
    assert rating.failure_tags == ["error cascade", "repetition loop"] and rating.note == ""
    assert rating_count(store, step.id) == 1 and annotator_progress(store, ada.id).rated == 1
    with pytest.raises(InvalidInput) as err:
        save_rating(store, ada.id, step.id, 6, 0, True, ["made up"], note=3)
    assert [p.path for p in err.value.problems] == ["realism", "outcome_correctness", "training_utility",
                                                    "failure_tags[0]", "note"]
    assert "numeric type error" in str(err.value)  # the message lists the vocabulary
    with pytest.raises(InvalidInput, match="give your name"):
        get_annotator(store, "  ")
    with pytest.raises(InvalidInput, match="'github' is not known"):
        get_annotator(store, "eve", source="github")
    assert set(FAILURE_TAGS) >= {"pagination drift", "contradiction", "unrealistic identifier or key format"}


def rating_count(store, step_id):
    return sqlite_rows(store.path, f"SELECT rating_count FROM step WHERE id = {step_id}")[0][0]


def test_ratings_per_dimension_are_the_agreement_data(store, world):
    rollout = create_rollout(store, world.id)
    steps = [append_step(store, rollout.id, call(f"A{i}"), "{}", MODEL) for i in range(2)]
    ada, bob = get_annotator(store, "ada"), get_annotator(store, "bob")
    save_rating(store, bob.id, steps[0].id, 1, 2, 3)
    save_rating(store, ada.id, steps[0].id, 2, 2, 2)
    save_rating(store, ada.id, steps[1].id, 5, 4, 3)
    realism = ratings_for_dimension(store, "realism")
    assert [(r.step_id, r.annotator, r.value) for r in realism] == [
        (steps[0].id, "ada", 2), (steps[0].id, "bob", 1), (steps[1].id, "ada", 5)]
    assert [r.value for r in ratings_for_dimension(store, "training_utility")] == [2, 3, 3]
    with pytest.raises(InvalidInput, match="'speed' is not rated"):
        ratings_for_dimension(store, "speed")


# --- curricula and training runs ----------------------------------------------------------------------------------


def test_curricula_are_versioned_sets_of_accepted_rollouts(store, world):
    a, b, c = (create_rollout(store, world.id, title, status="accepted") for title in ("a", "b", "c"))
    pending = create_rollout(store, world.id, "p")
    first = create_curriculum_version(store, "refunds", [b.id, a.id, b.id], description="first cut")
    second = create_curriculum_version(store, "refunds", [c.id])
    assert (first.version, second.version) == (1, 2)
    assert [r.title for r in curriculum_rollouts(store, first.id)] == ["b", "a"]  # given order, no duplicates
    assert [(s.curriculum.version, s.rollout_count) for s in list_curricula(store)] == [(2, 1), (1, 2)]
    assert get_curriculum(store, "refunds").id == second.id
    assert get_curriculum(store, "refunds", 1).description == "first cut"
    with pytest.raises(InvalidInput, match=f"rollouts {pending.id} are not accepted"):
        create_curriculum_version(store, "refunds", [a.id, pending.id])
    assert create_curriculum_version(store, "drafts", [pending.id], accepted_only=False).version == 1
    with pytest.raises(InvalidInput, match="no rollouts with ids 4040"):
        create_curriculum_version(store, "refunds", [a.id, 4040])
    with pytest.raises(InvalidInput, match="pick at least one rollout"):
        create_curriculum_version(store, "refunds", [])
    with pytest.raises(InvalidInput, match="no curriculum 'refunds' version 9"):
        get_curriculum(store, "refunds", 9)


def test_a_curriculum_version_exports_its_rollouts_as_saved_and_an_edit_unaccepts(store, world):
    rollout = create_rollout(store, world.id, "frozen")
    first = append_step(store, rollout.id, call("A1"), '{"status": "refunded"}', MODEL)
    set_status(store, rollout.id, "accepted")
    version = create_curriculum_version(store, "frozen", [rollout.id])
    append_step(store, rollout.id, call("A2"), '{"status": "later"}', MODEL)
    assert get_rollout(store, rollout.id).status == "pending"  # no longer what was accepted
    set_status(store, rollout.id, "accepted")
    edit_step_response(store, first.id, '{"status": "edited"}}}', editor="ada")
    assert get_rollout(store, rollout.id).status == "pending"
    [saved] = curriculum_snapshots(store, version.id)
    assert (saved.rollout_id, saved.status, saved.title) == (rollout.id, "accepted", "frozen")
    assert [s["response"] for s in saved.steps] == ['{"status": "refunded"}']  # as it was when saved
    assert saved.steps[0]["call"] == call("A1").to_json()


def test_training_runs_record_status_times_and_metrics(store, world):
    rollout = create_rollout(store, world.id, status="accepted")
    curriculum = create_curriculum_version(store, "c", [rollout.id])
    run = create_run(store, curriculum.id, {"lr": 1e-5, "group_size": 8}, log_path="runs/1.log")
    assert (run.status, run.started_at, run.config["group_size"]) == ("queued", None, 8)
    running = update_run(store, run.id, status="running", pid=4242)
    assert running.started_at is not None and running.finished_at is None and running.pid == 4242
    add_metrics(store, run.id, 0, {"loss": 2.5, "reward": 0.1})
    add_metrics(store, run.id, 1, {"loss": 2.0})
    done = update_run(store, run.id, status="finished")
    assert done.finished_at >= done.started_at
    assert [(m.step, m.value) for m in run_metrics(store, run.id, "loss")] == [(0, 2.5), (1, 2.0)]
    assert [m.name for m in run_metrics(store, run.id)] == ["loss", "loss", "reward"]
    other = create_run(store, curriculum.id, {})
    assert [r.id for r in list_runs(store)] == [other.id, run.id]
    assert [r.id for r in list_runs(store, curriculum_id=curriculum.id + 1)] == []
    with pytest.raises(InvalidInput, match=r"values\.loss: must be a finite number"):
        add_metrics(store, run.id, 2, {"loss": float("nan")})
    with pytest.raises(InvalidInput, match="'paused' is not a run status"):
        update_run(store, run.id, status="paused")
    with pytest.raises(InvalidInput, match="config"):
        create_run(store, curriculum.id, {"callback": print})


# --- the packed decode trace --------------------------------------------------------------------------------------


def test_a_trace_packs_into_nine_bytes_an_entry_and_back():
    trace = DecodeTrace([Commit(position, position // 4, 0.25, copied=position < 8) for position in range(64)])
    blob = pack_trace(trace)
    assert len(blob) == 1 + 9 * 64 and unpack_trace(blob) == trace
    version_1 = bytes([1]) + struct.pack("<HHf", 3, 1, 0.5)  # written before copies were recorded
    assert unpack_trace(version_1) == DecodeTrace([Commit(3, 1, 0.5)])
    assert unpack_trace(None) == DecodeTrace() and unpack_trace(pack_trace(DecodeTrace())) == DecodeTrace()
    with pytest.raises(InvalidInput, match=r"trace\[0\]\.step"):
        pack_trace(DecodeTrace([Commit(0, 70_000, 0.5)]))
    with pytest.raises(InvalidInput, match=r"trace\[0\]\.confidence"):
        DecodeTrace.from_json([[0, 0, float("inf")]])
    with pytest.raises(InvalidInput, match="unreadable decode trace"):
        unpack_trace(b"\x07abc")

WRITE_ONE_CURRICULUM = """
import sys
from wmstudio.store import ensure_curriculum, open_store
ensure_curriculum(open_store(sys.argv[1]), sys.argv[2], "written by another process")
print("written", flush=True)
sys.stdin.readline()  # stay open until told: its WAL is the only copy of what it wrote
"""


def test_opening_an_open_database_again_keeps_this_process_reading_what_others_write(tmp_path):
    """open_store read the file's first bytes again on each call; closing that descriptor dropped every POSIX lock
    this process's SQLite connections held, so the next process believed itself alone, deleted the WAL when it
    ended, and this process went on reading a stale copy (the CLI inside the studio, or a test, opens twice)."""
    import subprocess
    import sys

    path = tmp_path / "studio.db"
    store = open_store(path)
    assert list_curricula(store) == []  # a pooled connection now holds its locks
    assert open_store(path) is store
    writers = []
    try:
        for name in ("first", "second"):
            writer = subprocess.Popen([sys.executable, "-c", WRITE_ONE_CURRICULUM, str(path), name],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert writer.stdout.readline() == "written\n"
            writers.append(writer)
            if name == "first":
                writer.communicate("\n", timeout=30)  # it ends: the last one out checkpoints, and believed alone
        assert sorted(s.curriculum.name for s in list_curricula(store)) == ["first", "second"]
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.communicate("\n", timeout=30)
