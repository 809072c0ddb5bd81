"""Curriculum export to a Hugging Face dataset folder and import back: load_dataset reads it, rollouts round-trip.

Worlds are built here (one with BFCL's real travel-booking tools from ../shared/samples); the hub is faked only at
the HfApi boundary, so push_to_hub runs its real code path without the network."""

import fnmatch
import json
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import HfApi

from wmstudio.problems import InvalidInput
from wmstudio.studio.datasets import (
    CARD_FILE,
    JSONL_FILE,
    PARQUET_FILE,
    ExportRollout,
    ExportStep,
    PushFailed,
    export_dataset,
    import_dataset,
    push_to_hub,
)
from wmstudio.world.history import HistoryStep
from wmstudio.world.prompt.render import render_chat
from wmstudio.world.spec import Call, parse_world
from wmstudio.world.tools import parse_tools

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"


def shop_world():
    return parse_world({
        "name": "shop",
        "description": "Orders and refunds",
        "initial_state": {"orders": [{"id": 7, "total": 12.5, "status": "delivered"}]},
        "task": "Refund order 7 for the customer (ünïcode: 退款).",
        "tools": [{
            "type": "function",
            "function": {
                "name": "refund_order",
                "description": "Refund an order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "integer"},
                                                                "amount": {"type": "number"}},
                               "required": ["order_id"]},
                "response": {"type": "object", "properties": {"status": {"type": "string"},
                                                              "refund_processed": {"type": "boolean"}}},
            },
        }],
        "rules": [{"text": "An error status means no refund was processed",
                   "check": 'response.status != "error" || response.refund_processed == false'}],
        "directives": ["inject error: payment gateway timeout"],
    })


def travel_world():
    path = SAMPLES / "bfcl" / "multi_turn_func_doc" / "travel_booking.json"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    tools = parse_tools(raw, "bfcl").tools
    return parse_world({"name": "travel", "task": "Book a flight to Tokyo", "initial_state": "Logged out.",
                        "tools": [tool.to_json() for tool in tools]})


def report(ok):
    return {"ok": ok, "json_valid": True, "schema_errors": [],
            "rule_violations": [] if ok else [{"rule": "An error status means no refund was processed",
                                               "message": "refund_processed is true"}],
            "anchor_violations": []}


def curriculum():
    shop, travel = shop_world(), travel_world()
    return [
        ExportRollout(
            id="r1", world=shop, title="Refund that fails", status="accepted", tags=["error", "refund"],
            steps=[
                ExportStep(Call("refund_order", {"order_id": 7, "amount": 12.5}),
                           '{"status":"error","refund_processed":false}', report(True),
                           {"model": "wmstudio-tiny", "sampler": {"steps": 16, "strategy": "low_confidence"},
                            "seed": 3, "anchors": [{"path": "status", "value": "error"}]}),
                ExportStep(Call("refund_order", {"order_id": 7}), '{"status":"error","refund_processed":true}',
                           report(False), {"human_edit": True, "original": '{"status":"ok"}'}),
                ExportStep(Call("refund_order", {"order_id": 7}), "Service unavailable\n(retry later)", None, {}),
            ],
        ),
        ExportRollout(
            id="r2", world=travel, title="", status="pending", tags=[],
            steps=[ExportStep(Call("authenticate_travel", {"client_id": "abc", "client_secret": "s3cr3t",
                                                           "refresh_token": "t", "grant_type": "read_write",
                                                           "user_first_name": "Ana", "user_last_name": "Li"}),
                              '{"expires_in": 3600, "access_token": "tok_1", "token_type": "Bearer"}',
                              report(True), {"model": "ar-baseline", "seed": 0})],
        ),
    ]


def load(folder, tmp_path, **kwargs):
    return datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "hf-cache"), **kwargs)["train"]


def test_export_loads_with_load_dataset_and_jsonl_matches_parquet(tmp_path):
    folder = export_dataset(curriculum(), tmp_path / "ds", "refund-curriculum")
    assert folder == tmp_path / "ds"
    rows = load(folder, tmp_path)
    assert rows.num_rows == 4
    same = datasets.load_dataset("json", data_files=str(folder / JSONL_FILE), cache_dir=str(tmp_path / "c2"))["train"]
    assert same.to_list() == rows.to_list()
    first = rows[0]
    assert first["dataset"] == "refund-curriculum" and first["world_name"] == "shop"
    assert [m["role"] for m in first["messages"]] == ["system", "user", "assistant"]
    assert first["messages"][2]["content"] == '{"status":"error","refund_processed":false}'
    assert (first["rollout_id"], first["step_index"], first["rollout_tags"]) == ("r1", 0, ["error", "refund"])


def test_messages_are_the_chat_rows_of_render_chat_with_the_rollout_history(tmp_path):
    rollouts = curriculum()
    folder = export_dataset(rollouts, tmp_path / "ds", "c")
    rows = load(folder, tmp_path)
    shop = rollouts[0]
    history = [HistoryStep(call=s.call, response=s.response) for s in shop.steps[:2]]
    expected = render_chat(shop.world, shop.steps[2].call, history, response=shop.steps[2].response)
    assert rows[2]["messages"] == expected["messages"]
    assert "Turn 2 response" in rows[2]["messages"][1]["content"]


def test_import_gives_back_identical_rollouts(tmp_path):
    rollouts = curriculum()
    folder = export_dataset(rollouts, tmp_path / "ds", "c")
    assert import_dataset(folder) == rollouts
    # from the JSONL alone, and from either data file named directly
    (folder / PARQUET_FILE).unlink()
    assert import_dataset(folder) == rollouts
    assert import_dataset(folder / JSONL_FILE) == rollouts


def test_row_order_in_the_file_does_not_matter(tmp_path):
    rollouts = curriculum()
    folder = export_dataset(rollouts, tmp_path / "ds", "c")
    lines = (folder / JSONL_FILE).read_text(encoding="utf-8").splitlines()
    shuffled = tmp_path / "shuffled.jsonl"
    shuffled.write_text("\n".join([lines[2], lines[0], lines[3], lines[1]]) + "\n", encoding="utf-8")
    back = import_dataset(shuffled)
    assert sorted(back, key=lambda r: r.id) == rollouts


def test_card_front_matter_points_at_the_parquet(tmp_path):
    folder = export_dataset(curriculum(), tmp_path / "ds", "my curriculum")
    text = (folder / CARD_FILE).read_text(encoding="utf-8")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["pretty_name"] == "my curriculum"
    assert front["configs"][0]["data_files"] == [{"split": "train", "path": PARQUET_FILE}]
    assert "| `made_by` |" in text


def test_reexport_replaces_the_files_and_reports_progress(tmp_path):
    seen = []
    export_dataset(curriculum(), tmp_path / "ds", "c")
    export_dataset(curriculum()[:1], tmp_path / "ds", "c", progress=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 1)]
    assert pq.read_table(tmp_path / "ds" / PARQUET_FILE).num_rows == 3
    assert not list((tmp_path / "ds" / "data").glob("*.tmp"))


def test_max_chars_keeps_the_newest_turns_that_fit_and_says_how_many_were_cut(tmp_path):
    rollout = curriculum()[0]
    long_step = ExportStep(Call("refund_order", {"order_id": 7}), json.dumps({"log": "x" * 3000}), None, {})
    rollout.steps = [long_step, long_step, rollout.steps[0]]
    folder = export_dataset([rollout], tmp_path / "ds", "c", max_chars=2500)
    last = load(folder, tmp_path)[2]["messages"]
    assert "History (2 earlier turn(s) not shown):" in last[1]["content"]
    assert len(last[0]["content"]) + len(last[1]["content"]) <= 2500
    assert import_dataset(folder) == [rollout]  # the columns keep every response whole


def test_bad_rollouts_are_named_before_anything_is_written(tmp_path):
    rollouts = curriculum()
    rollouts[0].steps[1].response = {"status": "ok"}
    rollouts[0].steps[2].made_by = {"sampler": ("low_confidence",)}
    rollouts[1].id = "r1"
    rollouts.append(ExportRollout(id="r3", world=shop_world(), steps=[]))
    with pytest.raises(InvalidInput) as err:
        export_dataset(rollouts, tmp_path / "ds", "c")
    text = str(err.value)
    assert "rollouts[0].steps[1].response: must be the response text" in text
    assert "rollouts[0].steps[2].made_by: must be a JSON object" in text
    assert "rollouts[1].id: 'r1' is also rollouts[0]'s id" in text
    assert "rollouts[2].steps: no steps" in text
    assert not (tmp_path / "ds").exists()
    with pytest.raises(InvalidInput, match="rollouts: nothing to export"):
        export_dataset([], tmp_path / "ds", "c")
    with pytest.raises(InvalidInput, match="name: give the dataset a name"):
        export_dataset(curriculum(), tmp_path / "ds", " ")
    (tmp_path / "file").write_text("x")
    with pytest.raises(InvalidInput, match="is a file, not a folder"):
        export_dataset(curriculum(), tmp_path / "file", "c")


def test_malformed_folders_get_clear_messages(tmp_path):
    with pytest.raises(InvalidInput, match="no such folder or file"):
        import_dataset(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInput, match="not an exported wmstudio dataset"):
        import_dataset(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("hi")
    with pytest.raises(InvalidInput, match="not a .parquet or .jsonl file"):
        import_dataset(tmp_path / "notes.txt")

    broken = tmp_path / "broken" / "data"
    broken.mkdir(parents=True)
    (broken / "train-00000-of-00001.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InvalidInput, match="not a readable parquet file"):
        import_dataset(tmp_path / "broken")

    other = tmp_path / "other.parquet"
    datasets.Dataset.from_list([{"messages": [{"role": "user", "content": "hi"}]}]).to_parquet(str(other))
    with pytest.raises(InvalidInput, match="missing column\\(s\\) rollout_id.*not a wmstudio export"):
        import_dataset(other)


def edited_jsonl(tmp_path, edit):
    """Export the curriculum, apply `edit(rows)` to the parsed JSONL rows, write them back, return the file."""
    folder = export_dataset(curriculum(), tmp_path / "ds", "c")
    path = folder / JSONL_FILE
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    edit(rows)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_bad_rows_name_the_row_and_column(tmp_path):
    def break_rows(rows):
        rows[1]["call"] = '{"name": "refund_order", "arguments": '
        rows[2]["made_by"] = "[1, 2]"
        rows[3]["world"] = json.dumps({"name": "travel", "rules": [{"text": "r", "check": "response.("}]})

    with pytest.raises(InvalidInput) as err:
        import_dataset(edited_jsonl(tmp_path, break_rows))
    text = str(err.value)
    assert "rows[1].call: invalid JSON" in text
    assert "rows[2].made_by: must be a JSON object" in text
    assert "rows[3].world.rules[0].check: CEL syntax error" in text


def test_a_gap_in_a_rollouts_steps_is_reported(tmp_path):
    path = edited_jsonl(tmp_path, lambda rows: rows.pop(1))
    with pytest.raises(InvalidInput, match=r"rollout 'r1' has steps \[0, 2\]: expected 0..1"):
        import_dataset(path)


def test_rows_of_one_rollout_must_agree_on_its_world_and_status(tmp_path):
    def edit(rows):
        rows[2]["rollout_status"] = "rejected"

    with pytest.raises(InvalidInput, match=r"rows\[2\].rollout_status: differs from rows\[0\]"):
        import_dataset(edited_jsonl(tmp_path, edit))


def test_broken_jsonl_lines_are_named_by_line(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"rollout_id": "r1"\n', encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"rows.jsonl:1:\d+: invalid JSON"):
        import_dataset(path)
    path.write_text('{"rollout_id": "r1"}\n', encoding="utf-8")
    with pytest.raises(InvalidInput, match=r"rows.jsonl:1: missing column\(s\) rollout_title"):
        import_dataset(path)
    path.write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(InvalidInput, match="not UTF-8"):
        import_dataset(path)


def test_push_to_hub_uploads_the_folder_as_a_dataset_repo(tmp_path, monkeypatch):
    calls = []

    class Commit:
        commit_url = "https://huggingface.co/datasets/ana/refunds/commit/abc123"

    def fake_create_repo(self, repo_id, **kwargs):
        calls.append(("create_repo", repo_id, kwargs, self.token))

    def fake_upload_folder(self, **kwargs):  # what the hub would receive: the files matching allow_patterns
        files = (str(p.relative_to(kwargs["folder_path"])) for p in Path(kwargs["folder_path"]).rglob("*")
                 if p.is_file())
        uploaded = sorted(f for f in files if any(fnmatch.fnmatch(f, pat) for pat in kwargs["allow_patterns"]))
        calls.append(("upload_folder", kwargs, uploaded))
        return Commit()

    monkeypatch.setattr(HfApi, "create_repo", fake_create_repo)
    monkeypatch.setattr(HfApi, "upload_folder", fake_upload_folder)
    folder = export_dataset(curriculum(), tmp_path / "ds", "c")
    (folder / "notes.txt").write_text("private scratch, not part of the dataset")
    url = push_to_hub(folder, "ana/refunds", "hf_token123", private=True)
    assert url == Commit.commit_url
    assert calls[0] == ("create_repo", "ana/refunds", {"repo_type": "dataset", "private": True, "exist_ok": True},
                        "hf_token123")
    _name, kwargs, uploaded = calls[1]
    assert kwargs["repo_id"] == "ana/refunds" and kwargs["repo_type"] == "dataset"
    assert uploaded == sorted([CARD_FILE, JSONL_FILE, PARQUET_FILE])


def test_push_to_hub_bad_input_and_hub_failures(tmp_path, monkeypatch):
    with pytest.raises(InvalidInput) as err:
        push_to_hub(tmp_path, "refunds", "")
    text = str(err.value)
    assert "folder: " in text and "export the curriculum first" in text
    assert "repo_id: 'refunds' is not a repo id" in text and "token: no Hugging Face token" in text

    def refuse(self, repo_id, **kwargs):
        raise PermissionError("401 Unauthorized: invalid token")

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    folder = export_dataset(curriculum(), tmp_path / "ds", "c")
    with pytest.raises(PushFailed, match="could not push .* to ana/refunds: 401 Unauthorized.*write access"):
        push_to_hub(folder, "ana/refunds", "hf_bad")


def test_export_never_overwrites_what_it_did_not_write_and_replaces_what_it_did(tmp_path):
    import subprocess

    from typer.testing import CliRunner

    from wmstudio.cli import app
    from wmstudio.store import MadeBy, append_step, create_rollout, open_store, save_world_version
    from wmstudio.studio.written_files import MARKER

    out = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(out)], check=True)
    (out / "README.md").write_text("# my dataset repo\n")
    with pytest.raises(InvalidInput, match="already holds README.md, which `wmstudio dataset export` did not"):
        export_dataset(curriculum(), out, "c")
    assert (out / "README.md").read_text() == "# my dataset repo\n" and not (out / "data").exists()

    store = open_store(tmp_path / "studio.db")
    world = save_world_version(store, shop_world())
    rollout = create_rollout(store, world.id, "one")
    append_step(store, rollout.id, Call("refund_order", {"order_id": 7}), '{"status": "ok"}', MadeBy.by_model("m"))
    runner = CliRunner()
    argv = ["rollouts", "export", str(rollout.id), "--out", str(out), "--db", str(store.path)]
    refused = runner.invoke(app, argv)
    assert refused.exit_code == 2 and "already holds README.md" in refused.stderr and "Traceback" not in refused.output
    assert (out / "README.md").read_text() == "# my dataset repo\n"

    (out / "README.md").rename(out / "MY-README.md")
    (out / "data").mkdir()
    (out / "data" / "mine.csv").write_text("a,b\n")
    assert runner.invoke(app, argv).exit_code == 0
    assert runner.invoke(app, argv).exit_code == 0  # again: it replaces its own files
    assert set(json.loads((out / MARKER).read_text())["files"]) == {CARD_FILE, PARQUET_FILE, JSONL_FILE}
    assert (out / "MY-README.md").is_file() and (out / "data" / "mine.csv").read_text() == "a,b\n"
    assert (out / ".git" / "HEAD").is_file() and len(import_dataset(out)) == 1

    (out / MARKER).unlink()  # an export made before exports kept a record: known by its card
    export_dataset(curriculum(), out, "again")
    assert len(import_dataset(out)) == len(curriculum())
    (out / "link").symlink_to(tmp_path)
    with pytest.raises(InvalidInput, match="is a symbolic link"):
        export_dataset(curriculum(), out / "link", "c")
