"""Hostile inputs, each a small file made here, through the real CLI (and the studio's upload functions): exit 2
with a one-line message on stderr, never a traceback, and a limit named where one was met.

Times are printed (run with -s), not asserted: `benchmarks/hostile_inputs_bench.py` measures time and memory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import ASSETS_DIR
from wmstudio.world.checks.report import check_step
from wmstudio.world.spec import Call, load_world

EXAMPLES = ASSETS_DIR / "examples"
WORLD, CALL, RESPONSE = (EXAMPLES / name for name in ("refund-world.json", "refund-call.json",
                                                      "coherent-response.json"))
DEEP = "[" * 10_000 + "]" * 10_000
BIG_NUMBER = "9" * 5_000
TEN = "[1,2,3,4,5,6,7,8,9,10]"
NESTED_ALL = f"{TEN}.all(a, {TEN}.all(b, {TEN}.all(c, {TEN}.all(d, {TEN}.all(e, a + b + c + d + e > 0)))))"
ALIAS_BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi", strict=True))
runner = CliRunner()


def dataset_row(**columns) -> str:
    """One line of an exported dataset's data/train.jsonl (the refund world, one call), `columns` replaced as text."""
    row = {"rollout_id": "r1", "rollout_title": "t", "rollout_status": "accepted", "rollout_tags": [],
           "step_index": 0, "world": WORLD.read_text(), "call": CALL.read_text(), "response": RESPONSE.read_text(),
           "check_report": "null", "made_by": json.dumps({"kind": "imported", "source": "x"})}
    return json.dumps({**row, **columns})


def chat_row(state: str) -> str:
    """A world-model chat row (the Patronus format) whose user turn holds `state` as written."""
    action = json.dumps({"name": "get_order", "arguments": {}})
    return json.dumps({"messages": [{"role": "user", "content": f"State: {state}\n\nAction: {action}"},
                                    {"role": "assistant", "content": "{}"}]})


DB = ["--db", "{tmp}/studio.db"]


def world_with(**fields) -> str:
    return json.dumps({**json.loads(WORLD.read_text()), **fields})


def world_holding(number_text: str) -> str:
    """The refund world with `number_text` written as its initial state's one number."""
    return world_with(initial_state={"n": "N"}).replace('"N"', number_text)


# name -> (files to write: name -> text, argv with {tmp} for the folder, text the message must hold)
CASES = {
    "deep world": ({"w.json": DEEP}, ["validate", "{tmp}/w.json"], "nested 10,000 levels deep, over the 100-level"),
    "deep tool file": ({"t.json": DEEP}, ["tools", "import", "{tmp}/t.json"], "over the 100-level limit"),
    "deep JSON Lines record": ({"t.jsonl": '{"name": "x"}\n' + DEEP}, ["tools", "import", "{tmp}/t.jsonl"],
                               "t.jsonl:2: nested 10,000 levels deep"),
    "deep call": ({"c.json": DEEP}, ["check", WORLD, "--call", "{tmp}/c.json", "--response", RESPONSE],
                  "call file: {tmp}/c.json: nested 10,000 levels deep"),
    "deep call arguments text": ({"c.json": json.dumps({"name": "refund_order", "arguments": DEEP})},
                                 ["prompt", WORLD, "--call", "{tmp}/c.json"], "call.arguments: nested 10,000 levels"),
    "deep response": ({"r.json": DEEP}, ["check", WORLD, "--call", CALL, "--response", "{tmp}/r.json"],
                      "r.json: nested 10,000 levels deep"),
    "valid 900-deep response": ({"r.json": "[" * 900 + "]" * 900},
                                ["check", WORLD, "--call", CALL, "--response", "{tmp}/r.json"],
                                "nested 900 levels deep, over the 100-level limit"),
    "deep anchor value": ({}, ["check", WORLD, "--call", CALL, "--response", RESPONSE, "--anchor", "status=" + DEEP],
                          "[[[...: the value nested 10,000 levels deep"),
    "deep history": ({"h.json": DEEP}, ["prompt", WORLD, "--call", CALL, "--history", "{tmp}/h.json"],
                     "h.json: nested 10,000 levels deep"),
    "deep response inside a history": (
        {"h.json": json.dumps([{"call": json.loads(CALL.read_text()), "response": DEEP}])},
        ["prompt", WORLD, "--call", CALL, "--history", "{tmp}/h.json"], "step 1 response: nested 10,000 levels"),
    "5,000-digit integer in a world": ({"w.json": world_holding(BIG_NUMBER)},
                                       ["validate", "{tmp}/w.json"], "a number of 5,000 digits"),
    "5,000-digit integer in a call": ({"c.json": '{"name": "refund_order", "arguments": {"amount_cents": '
                                                 + BIG_NUMBER + "}}"},
                                      ["prompt", WORLD, "--call", "{tmp}/c.json"], "a number of 5,000 digits"),
    "5,000-digit integer in a tool file": ({"t.json": "[" + BIG_NUMBER + "]"}, ["tools", "import", "{tmp}/t.json"],
                                           "over the 100-character limit for numbers"),
    "5,000-digit anchor": ({}, ["check", WORLD, "--call", CALL, "--response", RESPONSE, "--anchor",
                                "status=" + BIG_NUMBER], "a number of 5,000 digits"),
    "number beyond a float": ({"w.json": world_holding("1e400")},
                              ["validate", "{tmp}/w.json"], "the number 1e400 is too large"),
    "NaN in a world": ({"w.json": world_holding("NaN")},
                       ["validate", "{tmp}/w.json"], "invalid JSON (NaN is not JSON, write null or a number)"),
    "Infinity in a call": ({"c.json": '{"name": "refund_order", "arguments": {"amount_cents": Infinity}}'},
                           ["prompt", WORLD, "--call", "{tmp}/c.json"], "Infinity is not JSON"),
    "lone surrogate in a world's text": ({"w.json": world_with(task="refund \ud800 now")},
                                         ["validate", "{tmp}/w.json"], "task: holds a lone surrogate (\\ud800)"),
    "lone surrogate in a world, then prompt": ({"w.json": world_with(task="refund \ud800 now")},
                                               ["prompt", "{tmp}/w.json", "--call", CALL], "lone surrogate"),
    "lone surrogate in an anchor": ({}, ["check", WORLD, "--call", CALL, "--response", RESPONSE, "--anchor",
                                         'status="\\ud800"'],
                                    'anchor status="\\ud800": the value holds a lone surrogate'),
    "bytes that are not UTF-8 in an anchor": ({}, ["check", WORLD, "--call", CALL, "--response", RESPONSE,
                                                   "--anchor", "status=\udcff"], "holds a lone surrogate (\\udcff)"),
    "lone surrogate in a response": ({"r.json": '{"status": "\\udc00", "refund_processed": false}'},
                                     ["check", WORLD, "--call", CALL, "--response", "{tmp}/r.json"],
                                     "status: holds a lone surrogate"),
    "lone surrogate key in a tool file": ({"t.json": '[{"\\ud800": 1}]'}, ["tools", "import", "{tmp}/t.json"],
                                          "holds a lone surrogate"),
    "YAML alias bomb": ({"t.yaml": ALIAS_BOMB}, ["tools", "import", "{tmp}/t.yaml"],
                        "YAML aliases (*name) expand it to over 500,000 values"),
    "YAML alias bomb without a YAML name": ({"t.json": ALIAS_BOMB}, ["tools", "import", "{tmp}/t.json"],
                                            "expand it to over 500,000 values"),
    "YAML alias inside itself": ({"t.yaml": "a: &a [1, *a]\n"}, ["tools", "import", "{tmp}/t.yaml"],
                                 "refers to the value it is inside"),
    "YAML nested by dashes": ({"t.yaml": "- " * 200_000 + "x\n"}, ["tools", "import", "{tmp}/t.yaml"],
                              "nested more than 500 levels deep, over the 100-level limit"),
    "YAML nested by brackets": ({"t.yaml": "a: " + DEEP + "\n"}, ["tools", "import", "{tmp}/t.yaml"],
                                "nested 10,000 levels deep"),
    "1 MB CEL rule": ({"w.json": world_with(rules=[{"text": "r", "check": "response.status != 'x' && " * 40_000
                                                                          + "true"}])},
                      ["validate", "{tmp}/w.json"], "over the 4,096-character limit: split it into several rules"),
    "CEL rule nested past the stack": ({"w.json": world_with(rules=[{"text": "r", "check": "(" * 2_000 + "true"
                                                                                          + ")" * 2_000}])},
                                       ["check", "{tmp}/w.json", "--call", CALL, "--response", RESPONSE],
                                       "rules[0].check: the check nests over 300 levels deep"),
    "--out naming a folder": ({}, ["tools", "import", WORLD.parent.parent / "worlds" / "retail.json", "-o", "{tmp}"],
                              "--out {tmp}: is a folder"),
    "--out under a file": ({"f.txt": "x"}, ["history", "import", EXAMPLES / "refund-call.json", "-o",
                                            "{tmp}/f.txt/out.json"], "{tmp}/f.txt is a file, not a folder"),
    "--out folder under a file": ({"f.txt": "x"}, ["corpus", "--out", "{tmp}/f.txt/corpus", "--rows", "3"],
                                  "{tmp}/f.txt is a file, not a folder"),
    "--response naming a folder": ({}, ["check", WORLD, "--call", CALL, "--response", "{tmp}"], "is a folder"),
    "--history naming a folder": ({}, ["prompt", WORLD, "--call", CALL, "--history", "{tmp}"], "is a folder"),
    "serve on every address without sign-in": ({}, ["serve", "--host", "0.0.0.0"],
                                               "--host 0.0.0.0 can be reached from other machines"),
    # the importers: every JSON Lines record (and every JSON text inside one) is read within the same limits
    "deep chat row": ({"rows.jsonl": DEEP}, ["rollouts", "import", "{tmp}/rows.jsonl", *DB],
                      "rows.jsonl:1: nested 10,000 levels deep, over the 100-level limit"),
    "5,000-digit integer in a chat row": ({"rows.jsonl": '{"messages": [' + BIG_NUMBER + "]}"},
                                          ["rollouts", "import", "{tmp}/rows.jsonl", *DB], "a number of 5,000 digits"),
    "deep state in a chat row": ({"rows.jsonl": chat_row(DEEP)}, ["rollouts", "import", "{tmp}/rows.jsonl", *DB],
                                 "State: nested 10,000 levels deep"),
    "chat rows that are not UTF-8": ({"rows.jsonl": '{"a": "caf\udce9"}'},
                                     ["rollouts", "import", "{tmp}/rows.jsonl", *DB], "not UTF-8 text"),
    "deep record in a bare .jsonl dataset": ({"d.jsonl": DEEP}, ["curricula", "import", "{tmp}/d.jsonl", *DB],
                                             "d.jsonl:1: nested 10,000 levels deep"),
    "5,000-digit integer in a bare .jsonl dataset": ({"d.jsonl": '{"a": ' + BIG_NUMBER + "}"},
                                                     ["curricula", "import", "{tmp}/d.jsonl", *DB],
                                                     "d.jsonl:1: a number of 5,000 digits"),
    "deep record in data/train.jsonl": ({"ds/data/train.jsonl": dataset_row() + "\n" + DEEP},
                                        ["curricula", "import", "{tmp}/ds", *DB],
                                        "train.jsonl:2: nested 10,000 levels deep"),
    "5,000-digit integer in data/train.jsonl": ({"ds/data/train.jsonl": '{"step_index": ' + BIG_NUMBER + "}"},
                                                ["curricula", "import", "{tmp}/ds", *DB], "a number of 5,000 digits"),
    "deep world text in a dataset row": ({"ds/data/train.jsonl": dataset_row(world=DEEP)},
                                         ["curricula", "import", "{tmp}/ds", *DB],
                                         "train.jsonl: rows[0].world: nested 10,000 levels deep"),
    "5,000-digit integer in a dataset row's call": (
        {"ds/data/train.jsonl": dataset_row(call='{"name": "refund_order", "arguments": {"n": ' + BIG_NUMBER + "}}")},
        ["curricula", "import", "{tmp}/ds", *DB], "rows[0].call: a number of 5,000 digits"),
    "deep line in scenarios.jsonl": ({"ds/data/train.jsonl": dataset_row(), "ds/scenarios.jsonl": DEEP},
                                     ["curricula", "import", "{tmp}/ds", *DB],
                                     "scenarios.jsonl: line 1: nested 10,000 levels deep"),
    "5,000-digit integer in scenarios.jsonl": ({"ds/data/train.jsonl": dataset_row(),
                                                "ds/scenarios.jsonl": '{"key": ' + BIG_NUMBER + "}"},
                                               ["curricula", "import", "{tmp}/ds", *DB],
                                               "scenarios.jsonl: line 1: a number of 5,000 digits"),
    "run id beyond SQLite's integers": ({}, ["runs", "show", str(10**30), *DB], "run_id: no training run with id"),
    "space build into a file": ({"f.txt": "x"}, ["space", "build", "{tmp}/f.txt"], "f.txt is a file, not a folder"),
}
if Path("/dev/zero").exists():
    CASES.update({
        "validate /dev/zero": ({}, ["validate", "/dev/zero"], "/dev/zero: reading it gave more than the 5,000,000"),
        "tools import /dev/zero": ({}, ["tools", "import", "/dev/zero"],
                                   "more than the 20,000,000-byte limit for a tool file"),
        "--call /dev/zero": ({}, ["prompt", WORLD, "--call", "/dev/zero"], "/dev/zero: reading it gave more"),
        "--response /dev/zero": ({}, ["check", WORLD, "--call", CALL, "--response", "/dev/zero"],
                                 "more than the 5,000,000-byte limit for a response"),
        "--history /dev/zero": ({}, ["prompt", WORLD, "--call", CALL, "--history", "/dev/zero"],
                                "more than the 64,000,000-byte limit for a history"),
    })


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_exits_2_with_a_message_and_no_traceback(name, tmp_path):
    files, argv, expected = CASES[name]
    for file, text in files.items():
        (tmp_path / file).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / file).write_text(text, encoding="utf-8", errors="surrogatepass")
    args = [str(a).replace("{tmp}", str(tmp_path)) for a in argv]
    started = time.perf_counter()
    result = runner.invoke(app, args)
    seconds = time.perf_counter() - started
    print(f"{name}: exit {result.exit_code} in {seconds:.2f} s")
    assert result.exit_code == 2, (result.exception, result.output[-2000:])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and result.stderr.count("\n") == 1
    assert result.stderr.startswith("error: ") and expected.replace("{tmp}", str(tmp_path)) in result.stderr


def test_a_rule_over_its_time_budget_is_reported_once_as_such(tmp_path, monkeypatch):
    monkeypatch.setenv("WMSTUDIO_CHECK_SECONDS", "0.2")
    world = tmp_path / "w.json"
    world.write_text(world_with(rules=[{"text": "slow", "check": NESTED_ALL},
                                       {"text": "fast", "check": "response.status == 'ok'"}]))
    started = time.perf_counter()
    result = runner.invoke(app, ["check", str(world), "--call", str(CALL), "--response", str(RESPONSE)])
    print(f"nested .all() rule checked in {time.perf_counter() - started:.2f} s")
    assert result.exit_code == 1
    violations = json.loads(result.stdout)["rule_violations"]
    assert [v["rule"] for v in violations] == ["slow", "fast"]
    assert violations[0]["message"].startswith("check stopped after 0.2 s of CPU time, its budget")
    assert "WMSTUDIO_CHECK_SECONDS" in violations[0]["message"]


def test_a_deep_but_valid_response_is_a_reported_problem_inside_rule_evaluation():
    world, call = load_world(WORLD), Call.from_json(json.loads(CALL.read_text()))
    deep: list = []
    for _ in range(5_000):  # deeper than Python follows: a response parsed elsewhere (the studio's checks take one)
        deep = [deep]
    report = check_step(world, call, {"status": "error", "refund_processed": deep})
    assert report.json_valid and not report.ok
    assert report.schema_errors == ["(root): nested too deeply to check against the response schema"]
    assert report.rule_violations[0]["message"] == "check not run: the response is nested too deeply for a check to " \
                                                   "read it"
    too_deep = check_step(world, call, "[" * 5_000 + "]" * 5_000)  # beyond what json can read: not JSON to us
    assert not too_deep.json_valid and not too_deep.ok


def test_serve_with_insecure_no_auth_starts_with_a_warning(monkeypatch):
    import wmstudio.ui.studio as studio

    started = {}
    monkeypatch.setattr(studio, "launch", lambda **kwargs: started.update(kwargs))
    result = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--insecure-no-auth", "--port", "9999"])
    assert result.exit_code == 0 and started["host"] == "0.0.0.0" and started["insecure_no_auth"]
    assert result.stderr.startswith("warning: serving on 0.0.0.0:9999 without sign-in (--insecure-no-auth)")
    signed_in = runner.invoke(app, ["serve", "--host", "0.0.0.0", "--auth", "ann:secret"])
    assert signed_in.exit_code == 0 and started["users"] == {"ann": "secret"} and signed_in.stderr == ""


def test_the_studio_upload_functions_refuse_the_same_files_with_the_fields_kept(tmp_path):
    from wmstudio.ui.world_tab import import_tools_into, open_world_file

    bomb, deep = tmp_path / "t.yaml", tmp_path / "w.json"
    bomb.write_text(ALIAS_BOMB)
    deep.write_text(DEEP)
    started = time.perf_counter()
    *fields, status = import_tools_into(str(bomb), "auto", "[]")
    assert "[]" not in fields and "expand it to over 500,000 values" in status  # the editor is left as it is
    *fields, status = open_world_file(str(deep))
    assert "nested 10,000 levels deep" in status
    print(f"studio refusals in {time.perf_counter() - started:.2f} s")


def test_a_dataset_card_nested_past_the_limits_is_not_read_for_the_curriculum_name(tmp_path):
    from wmstudio.studio.curricula import exported_curriculum_name

    folder = tmp_path / "retail-v3"
    folder.mkdir()
    for card in ("---\n" + "- " * 200_000 + "x\n---\n", "---\npretty_name: [" + DEEP + "]\n---\n",
                 "---\npretty_name: " + BIG_NUMBER + "\n---\n"):
        (folder / "README.md").write_text(card)
        assert exported_curriculum_name(folder) == "retail"  # the folder's name, as for a card without one
