"""World files: load, validate, round-trip; every problem named by its JSON path; CEL rules; JSON paths."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.world.jsonpath import format_path, get_path, parse_path, set_path
from wmstudio.world.rules.cel import Rule, cel_syntax_problem, compile_rules, evaluate_check
from wmstudio.world.spec import Call, WorldSpec, load_world, parse_world, read_json_file, save_world


def canonical_world() -> dict:
    """A world already in canonical form (what save_world writes), so to_json() must give it back unchanged."""
    return {
        "name": "bank",
        "description": "A small retail bank.",
        "initial_state": {"accounts": {"alice": {"balance": 120.5, "currency": "EUR"}}, "fees": [1, 2.5]},
        "task": "Move 20 EUR from Alice to Bob.",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "transfer",
                    "description": "Transfer money between two accounts.",
                    "parameters": {
                        "type": "object",
                        "properties": {"from": {"type": "string"}, "to": {"type": "string"},
                                       "amount": {"type": "number"}},
                        "required": ["from", "to", "amount"],
                    },
                    "response": {"type": "object", "properties": {"status": {"type": "string"}}},
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_balance",
                    "description": "Balance of one account.",
                    "parameters": {"type": "object", "properties": {"account": {"type": "string"}}},
                },
            },
        ],
        "rules": [
            {"text": "balances never go negative", "check": "response.balance >= 0.0"},
            {"text": "amounts are in the account's currency"},
        ],
        "directives": ["Answer in the bank's terse style."],
    }


def test_a_canonical_world_round_trips_exactly_through_files(tmp_path):
    data = canonical_world()
    world = parse_world(data)
    assert world.to_json() == data
    assert [t.name for t in world.tools] == ["transfer", "get_balance"]
    assert world.rules[0] == Rule("balances never go negative", "response.balance >= 0.0")
    first = save_world(world, tmp_path / "nested" / "bank.json")
    text = first.read_text(encoding="utf-8")
    assert json.loads(text) == data and text.endswith("\n")
    again = load_world(first)
    assert again == world
    second = save_world(again, tmp_path / "copy.json")
    assert second.read_text(encoding="utf-8") == text
    assert not list(tmp_path.glob("**/*.tmp")), "atomic save leaves no temporary file"


def test_writers_of_one_world_file_at_once_each_replace_it_whole(tmp_path):
    # the World tab writes its download file once per changed field, from parallel events: one shared temporary
    # name had a writer find its file already moved (FileNotFoundError in the server log)
    world, writers = parse_world(canonical_world()), 8
    for round_ in range(20):
        path, start = tmp_path / f"round-{round_}" / "bank.json", threading.Barrier(writers)

        def write(_: int) -> str:
            start.wait()
            return str(save_world(world, path))

        with ThreadPoolExecutor(writers) as pool:
            assert set(pool.map(write, range(writers))) == {str(path)}
        assert load_world(path) == world
    assert not list(tmp_path.glob("**/*.tmp")) and not list(tmp_path.glob("**/.*"))


def test_minimal_world_gets_defaults_and_text_state_is_kept():
    world = parse_world({"name": "  notes ", "initial_state": "A folder with two text files."})
    assert world == WorldSpec(name="notes", initial_state="A folder with two text files.")
    assert parse_world(world.to_json()) == world


def test_every_problem_is_reported_at_once_with_its_json_path():
    data = canonical_world()
    data.update(name="", colour="blue", task=3, directives="be nice")
    data["rules"] = [
        {"text": "ok", "check": "response.x >"},
        {"text": ""},
        7,
        {"text": "t", "why": 1},
        {"text": "t", "check": 42},
    ]
    with pytest.raises(InvalidInput) as err:
        parse_world(data, source="bank.json")
    found = {p.path: p.message for p in err.value.problems}
    assert set(found) == {"colour", "name", "task", "rules[0].check", "rules[1].text", "rules[2]", "rules[3]",
                          "rules[4].check", "directives"}
    assert "allowed fields are name" in found["colour"]
    assert "CEL syntax error at line 1, column" in found["rules[0].check"]
    message = str(err.value)
    assert message.startswith("bank.json: 9 problems\n") and "  - rules[0].check: " in message


def test_tool_problems_name_the_tool_index():
    data = canonical_world()
    data["tools"].append({"type": "function", "function": {"description": "no name"}})
    with pytest.raises(InvalidInput) as err:
        parse_world(data)
    assert [p.path.split(".")[0] for p in err.value.problems] == ["tools[2]"]
    repeated = canonical_world()
    repeated["tools"].append(repeated["tools"][0])  # an exact repeat is merged into one tool
    assert len(parse_world(repeated).tools) == len(canonical_world()["tools"])
    clash = canonical_world()
    clash["tools"].append({"type": "function", "function": {**clash["tools"][0]["function"], "description": "other"}})
    with pytest.raises(InvalidInput) as err:
        parse_world(clash)
    assert err.value.problems[0].path.startswith("tools[2]") and "duplicate" in err.value.problems[0].message
    not_a_list = canonical_world() | {"tools": {"transfer": {}}}
    with pytest.raises(InvalidInput, match=r"tools: must be a list of tools, got an object"):
        parse_world(not_a_list)
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        parse_world([canonical_world()])


def test_tool_lookup_by_name_lists_the_known_tools_when_missing():
    world = parse_world(canonical_world())
    assert world.tool("transfer").description.startswith("Transfer")
    with pytest.raises(KeyError, match="tools: transfer, get_balance"):
        world.tool("withdraw")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"name": "x",\n  "task": }', "world.json:2:11: invalid JSON"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        ("", "world.json:1:1: invalid JSON"),
    ],
)
def test_unreadable_world_files_get_a_clear_message(tmp_path, content, message):
    path = tmp_path / "world.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    with pytest.raises(InvalidInput) as err:
        load_world(path)
    assert message in str(err.value)


def test_missing_folder_and_huge_files_are_refused(tmp_path):
    with pytest.raises(InvalidInput, match="no such file"):
        read_json_file(tmp_path / "absent.json")
    with pytest.raises(InvalidInput, match="is a folder"):
        read_json_file(tmp_path)
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"name": "x" * 500}), encoding="utf-8")
    with pytest.raises(InvalidInput, match="over the 100-byte limit"):
        read_json_file(big, max_bytes=100)
    bom = tmp_path / "bom.json"
    bom.write_bytes("\ufeff".encode("utf-8") + b'{"name": "with bom"}')
    assert load_world(bom).name == "with bom"


def test_calls_accept_the_openai_tool_call_shape_and_name_bad_fields():
    call = Call.from_json({"id": "c1", "type": "function",
                           "function": {"name": "transfer", "arguments": '{"amount": 20}'}})
    assert call == Call("transfer", {"amount": 20})
    assert Call.from_json({"name": "get_balance"}).to_json() == {"name": "get_balance", "arguments": {}}
    with pytest.raises(InvalidInput, match=r"step\.arguments: not valid JSON"):
        Call.from_json({"name": "transfer", "arguments": "{amount: 20"}, source="step")
    with pytest.raises(InvalidInput) as err:
        Call.from_json({"arguments": [1]})
    assert [p.path for p in err.value.problems] == ["call.name"]
    with pytest.raises(InvalidInput, match="call.arguments: must be an object"):
        Call.from_json({"name": "transfer", "arguments": [1]})


def test_cel_syntax_problems_name_the_rule_and_position():
    assert cel_syntax_problem("response.total >= 0 && call.name == 'pay'") is None
    problem = cel_syntax_problem("response.total >= ", "rules[3].check")
    assert problem.path == "rules[3].check" and "line 1, column" in problem.message
    assert "empty CEL expression" in cel_syntax_problem("  ", "rules[0].check").message
    with pytest.raises(InvalidInput) as err:
        compile_rules([Rule("fine", "true"), Rule("broken", "(response.a"), Rule("no check")])
    assert [p.path for p in err.value.problems] == ["rules[1].check"]


def test_cel_checks_hold_fail_or_explain_why_they_could_not_run():
    variables = {"state": {"limit": 100}, "call": {"name": "pay", "arguments": {"amount": 20}},
                 "response": {"status": "ok", "paid": 20}, "history": []}
    assert evaluate_check("response.paid == call.arguments.amount && response.paid <= state.limit", variables) == (
        True, None)
    assert evaluate_check('response.status == "error"', variables) == (False, "check is false")
    holds, why = evaluate_check("response.refund > 0", variables)
    assert not holds and "could not be evaluated" in why
    holds, why = evaluate_check("response.paid + 1", variables)
    assert not holds and "not a boolean" in why
    assert evaluate_check("history.size() == 0", variables) == (True, None)


def test_json_paths_parse_format_read_and_write():
    assert parse_path("items[0].price") == ["items", 0, "price"]
    assert parse_path("['odd key'].x") == ["odd key", "x"]
    for path in ["status", "items[0].price", "a.b[2][3]", "['odd key'].x"]:
        assert format_path(parse_path(path)) == path
    for bad in ["", "items[", ".status", "a..b", "items[-1]"]:
        with pytest.raises(ValueError):
            parse_path(bad)
    document = {"items": [{"price": 12.5}], "status": "ok"}
    assert get_path(document, "items[0].price") == 12.5
    assert get_path(document, "items[3].price", default=None) is None
    with pytest.raises(KeyError):
        get_path(document, "status.code")
    built = set_path(None, "items[1].price", 3)
    assert built == {"items": [None, {"price": 3}]}
    assert set_path(document, "status", "error")["status"] == "error"
    with pytest.raises(TypeError):
        set_path({"status": "ok"}, "status.code", 1)


def test_cli_validate_reports_ok_or_every_problem(tmp_path):
    good = tmp_path / "bank.json"
    good.write_text(json.dumps(canonical_world()), encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(app, ["validate", str(good)])
    assert result.exit_code == 0 and "ok: world 'bank' with 2 tools and 2 rules" in result.stdout
    broken = canonical_world()
    broken["rules"][0]["check"] = "response.balance >="
    broken["directives"] = [1]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken), encoding="utf-8")
    result = runner.invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    assert "rules[0].check: CEL syntax error at line 1, column" in result.stderr
    assert "directives: must be a list of strings" in result.stderr and "Traceback" not in result.output


def test_world_names_are_normalised_and_hidden_characters_refused(tmp_path):
    """Look-alike names (full-width, zero-width, direction marks) once saved as separate worlds: a full-width name is
    the same world, one with characters nobody can see is refused naming `name`."""
    from wmstudio.store import list_worlds, open_store, save_world_version

    assert parse_world({"name": "\uff52\uff45\uff54\uff41\uff49\uff4c"}).name == "retail"  # ｒｅｔａｉｌ
    assert parse_world({"name": "  Caf\u0065\u0301 "}).name == "Caf\u00e9"  # composed
    for hidden in ("retail\u200b", "\u202eliater", "ret\u200dail", "retail\u2066", "re\x07tail", "\ufeffretail"):
        with pytest.raises(InvalidInput) as refused:
            parse_world({"name": hidden})
        assert refused.value.problems[0].path == "name" and "cannot see" in refused.value.problems[0].message
    store = open_store(tmp_path / "studio.db")
    save_world_version(store, parse_world({"name": "retail"}))
    save_world_version(store, WorldSpec(name="\uff52\uff45\uff54\uff41\uff49\uff4c"))  # built without parse_world
    assert [summary.name for summary in list_worlds(store)] == ["retail"]
    with pytest.raises(InvalidInput, match="cannot see"):
        save_world_version(store, WorldSpec(name="retail\u200b"))
