"""Another project's world-model chat rows imported as rollouts: one per row, steps marked imported, checked, and
nothing written when a row is bad. The rows are written in the Patronus format by our own renderer."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import DEMO_WORLDS_DIR
from wmstudio.store import filter_rollouts, open_store, rollout_steps
from wmstudio.studio.chat_rows import looks_like_chat_rows
from wmstudio.ui.rollouts_tab import import_upload
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.patronus import patronus_chat
from wmstudio.world.spec import Call, load_world

RETAIL = DEMO_WORLDS_DIR / "retail.json"


def rows_file(tmp_path, bad_line: str | None = None):
    world = load_world(RETAIL)
    order = world.initial_state["orders"][0]["id"]
    first = patronus_chat(world, Call("get_order", {"order_id": order}), [], response={"status": "ok",
                                                                                        "order_id": order})
    earlier = [HistoryStep(Call("get_order", {"order_id": order}), {"status": "ok", "order_id": order})]
    second = patronus_chat(world, Call("refund_order", {"order_id": order, "amount_cents": 5, "reason": "late"}),
                           earlier, response={"status": "error", "error": "not_delivered"})
    lines = [json.dumps(first), json.dumps(second)] + ([bad_line] if bad_line else [])
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path, order


def test_each_row_becomes_a_rollout_of_its_history_and_step(tmp_path):
    path, order = rows_file(tmp_path)
    db = tmp_path / "studio.db"
    result = CliRunner().invoke(app, ["rollouts", "import", str(path), "--world", str(RETAIL), "--db", str(db)])
    assert result.exit_code == 0, result.output
    created = json.loads(result.stdout)
    assert created["steps"] == 3 and len(created["rollouts"]) == 2
    store = open_store(db)
    steps = rollout_steps(store, created["rollouts"][1])
    assert [s.call["name"] for s in steps] == ["get_order", "refund_order"]
    assert json.loads(steps[1].response) == {"status": "error", "error": "not_delivered"}
    assert steps[1].made_by == {"kind": "imported", "source": "rows.jsonl:2"}
    assert steps[0].check_report is not None  # checked against the world the rows were made in
    again = CliRunner().invoke(app, ["rollouts", "import", str(path), "--world", str(RETAIL), "--db", str(db)])
    assert json.loads(again.stdout)["rollouts"] == created["rollouts"]  # the same file again adds nothing
    assert "imported into that world before" in again.stderr
    assert filter_rollouts(store).total == 2


def test_one_bad_row_imports_nothing_and_names_its_line(tmp_path):
    path, _ = rows_file(tmp_path, bad_line=json.dumps({"messages": [{"role": "user", "content": "hello"}]}))
    db = tmp_path / "studio.db"
    result = CliRunner().invoke(app, ["rollouts", "import", str(path), "--db", str(db)])
    assert result.exit_code == 2
    assert "rows.jsonl:3" in result.stderr and "State: " in result.stderr
    assert filter_rollouts(open_store(db)).total == 0


def test_a_row_over_the_size_limit_is_refused_by_its_line_and_nothing_is_imported(tmp_path):
    from wmstudio.studio.chat_rows import MAX_ROW_CHARS

    world = load_world(RETAIL)
    huge = patronus_chat(world, Call("get_order", {"order_id": "ORD-1"}), [],
                         response={"status": "ok", "note": "x" * (MAX_ROW_CHARS + 10)})  # one 4 MB line
    path, _ = rows_file(tmp_path, bad_line=json.dumps(huge))
    db = tmp_path / "studio.db"
    result = CliRunner().invoke(app, ["rollouts", "import", str(path), "--world", str(RETAIL), "--db", str(db)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "rows.jsonl:3" in result.stderr and f"{MAX_ROW_CHARS:,}-character limit" in result.stderr
    assert filter_rollouts(open_store(db)).total == 0


def test_the_studio_upload_tells_chat_rows_from_an_exported_dataset(tmp_path):
    path, _ = rows_file(tmp_path)
    assert looks_like_chat_rows(path)
    store = open_store(tmp_path / "studio.db")
    message = import_upload(store, str(path))
    assert "Imported 2 rollout(s) with 3 steps" in message
    assert filter_rollouts(store, world="imported-rows").total == 2  # no world given: one built from the calls


def test_a_tau_bench_results_file_gives_one_rollout_per_trajectory(tmp_path):
    def record(order: str) -> dict:
        return {"traj": [
            {"role": "user", "content": "Where is my order?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_order_details", "arguments": json.dumps({"order_id": order})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"order_id": order, "status": "pending"})}]}

    path = tmp_path / "results.json"
    path.write_text(json.dumps([record("#W1"), record("#W2")]))
    store = open_store(tmp_path / "studio.db")
    message = import_upload(store, str(path))
    assert "Imported 2 rollout(s) with 2 steps" in message
    page = filter_rollouts(store, world="imported-results")
    assert page.total == 2
    assert "was imported before" in import_upload(store, str(path))


def wmstudio(*args) -> object:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_our_own_corpus_export_and_prompt_rows_import(tmp_path):
    """What `wmstudio corpus`, the dataset export and `wmstudio prompt --format chat|patronus` write, `rollouts import`
    reads: our layout's `State: History: ...` turn included."""
    db = tmp_path / "studio.db"
    assert wmstudio("corpus", "--out", tmp_path / "corpus", "--rows", 12, "--seed", 3).exit_code == 0
    rows = [json.loads(line) for line in (tmp_path / "corpus" / "train.jsonl").read_text().splitlines()]
    made = wmstudio("rollouts", "import", tmp_path / "corpus" / "train.jsonl", "--db", db)
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["steps"] == sum(len(row["meta"]["history"]) + 1 for row in rows)
    rollout_ids = json.loads(made.stdout)["rollouts"]
    store = open_store(db)
    first = rollout_steps(store, rollout_ids[0])
    assert [step.call for step in first] == [*(s["call"] for s in rows[0]["meta"]["history"]),
                                             rows[0]["meta"]["call"]]
    assert first[-1].response == rows[0]["messages"][-1]["content"]

    exported = wmstudio("rollouts", "export", *rollout_ids[:3], "--out", tmp_path / "export", "--db", db)
    assert exported.exit_code == 0, exported.output
    again = wmstudio("rollouts", "import", tmp_path / "export" / "data" / "train.jsonl", "--db", db)
    assert again.exit_code == 0, again.output
    lengths = [len(rollout_steps(store, rid)) for rid in rollout_ids[:3]]
    created = json.loads(again.stdout)  # one row per step, each with the steps before it: a rollout per row
    assert len(created["rollouts"]) == sum(lengths) and created["steps"] == sum(n * (n + 1) // 2 for n in lengths)

    (tmp_path / "call.json").write_text(json.dumps({"name": "get_order", "arguments": {"order_id": "ORD-23411"}}))
    for fmt in ("chat", "patronus"):
        printed = wmstudio("prompt", RETAIL, "--call", tmp_path / "call.json", "--format", fmt)
        assert printed.exit_code == 0 and "None" not in printed.stderr  # no "to fit None characters" note
        row = tmp_path / f"prompt-{fmt}.json"
        row.write_text(printed.stdout)  # one pretty-printed row, no response yet
        refused = wmstudio("rollouts", "import", row, "--db", db)
        assert refused.exit_code == 2 and "has none to import" in refused.stderr
        answered = json.loads(printed.stdout)
        answered["messages"].append({"role": "assistant", "content": '{"order_id": "ORD-23411", "status": "ok"}'})
        row.write_text(json.dumps(answered, indent=2))
        taken = wmstudio("rollouts", "import", row, "--world", RETAIL, "--db", db)
        assert taken.exit_code == 0 and json.loads(taken.stdout)["steps"] == 1, taken.output
