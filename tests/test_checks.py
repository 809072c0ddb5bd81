"""Deterministic checks and anchors: the refund example, schema errors, rules over state/call/history, CLI exits."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.world.checks.report import CheckReport, check_step, json_equal
from wmstudio.world.history import parse_history
from wmstudio.world.spec import Call, parse_world
from wmstudio.world.steering.anchors import Anchor, anchor_problems, parse_anchor, parse_anchors

REFUND_RULE = "an error status means no refund was processed"
REFUND_CHECK = 'response.status != "error" || response.refund_processed == false'

RESPONSE_SCHEMA = {
    "$defs": {
        "Item": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "price": {"type": "number"}, "qty": {"type": "integer"}},
            "required": ["sku", "price"],
        }
    },
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": ["ok", "error"]},
        "refund_processed": {"type": "boolean"},
        "amount": {"type": "number"},
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        "page": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {"next": {"type": "integer"}}}]},
    },
    "required": ["status", "refund_processed"],
}


def shop_world(rules: list | None = None) -> dict:
    return {
        "name": "shop",
        "initial_state": {"orders": {"A1": {"total": 30.0, "status": "delivered"}}},
        "task": "Refund order A1.",
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "refund_order",
                    "description": "Refund an order in full.",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                    "response": RESPONSE_SCHEMA,
                },
            },
            {
                "type": "function",
                "function": {
                    "name": "get_order",
                    "description": "Look up an order (free-form answer).",
                    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                },
            },
        ],
        "rules": rules if rules is not None else [{"text": REFUND_RULE, "check": REFUND_CHECK}],
        "directives": [],
    }


CALL = Call("refund_order", {"order_id": "A1"})


def test_refund_example_incoherent_response_is_caught_and_coherent_one_passes():
    world = parse_world(shop_world())
    bad = check_step(world, CALL, '{"refund_processed": true, "status": "error"}')
    assert not bad.ok and bad.json_valid and bad.schema_errors == []
    assert bad.rule_violations == [{"rule": REFUND_RULE, "message": "check is false"}]
    good = check_step(world, CALL, '{"refund_processed": false, "status": "error"}', anchors=parse_anchors(['status="error"']))
    assert good.ok and good.rule_violations == [] and good.anchor_violations == []


def test_report_json_has_exactly_the_documented_keys_in_order():
    report = check_step(parse_world(shop_world()), CALL, '{"refund_processed": true, "status": "error"}')
    assert isinstance(report, CheckReport)
    data = report.to_json()
    assert list(data) == ["ok", "json_valid", "schema_errors", "rule_violations", "anchor_violations",
                          "message_strays", "invented"]
    json.dumps(data)


@pytest.mark.parametrize("text", ['{"status": "ok", ', "status: ok", "", '{"amount": NaN, "status": "ok"}'])
def test_text_that_is_not_strict_json_fails_json_valid(text):
    report = check_step(parse_world(shop_world(rules=[])), CALL, text)
    assert not report.json_valid and not report.ok
    assert report.schema_errors == []


def test_schema_errors_name_the_json_path_of_each_field():
    world = parse_world(shop_world(rules=[]))
    response = {"status": "done", "refund_processed": "yes", "items": [{"sku": "S1", "price": 1}, {"sku": "S2"}]}
    report = check_step(world, CALL, json.dumps(response))
    assert not report.ok and report.json_valid
    paths = [error.split(": ", 1)[0] for error in report.schema_errors]
    assert paths == ["items[1]", "refund_processed", "status"]
    assert "'price' is a required property" in report.schema_errors[0]
    missing = check_step(world, CALL, '{"status": "ok"}')
    assert missing.schema_errors == ["(root): 'refund_processed' is a required property"]


def test_a_tool_without_response_schema_only_needs_json():
    world = parse_world(shop_world(rules=[]))
    call = Call("get_order", {"order_id": "A1"})
    assert check_step(world, call, '"whatever JSON value"').ok
    assert not check_step(world, call, "plain words").ok


def test_rules_see_state_call_and_history():
    rules = [
        {"text": "the refund equals the order total", "check": "response.amount == state.orders.A1.total"},
        {"text": "the refunded order is the one asked for", "check": 'call.arguments.order_id == "A1"'},
        {"text": "an order is looked up before it is refunded",
         "check": 'history.exists(s, s.call.name == "get_order" && s.response.total == 30.0)'},
    ]
    world = parse_world(shop_world(rules=rules))
    history = parse_history([{"call": {"name": "get_order", "arguments": {"order_id": "A1"}},
                              "response": '{"total": 30.0}'}])
    response = '{"status": "ok", "refund_processed": true, "amount": 30.0}'
    assert check_step(world, CALL, response, history=history).ok
    report = check_step(world, Call("refund_order", {"order_id": "B2"}),
                        response.replace("30.0", "25.0"), history=[])
    assert [v["rule"] for v in report.rule_violations] == [r["text"] for r in rules]


def test_a_rule_over_a_missing_field_counts_as_violated_with_a_reason():
    world = parse_world(shop_world(rules=[{"text": "amounts are positive", "check": "response.amount > 0"}]))
    report = check_step(world, CALL, '{"status": "ok", "refund_processed": true}')
    assert not report.ok and report.rule_violations[0]["rule"] == "amounts are positive"
    assert "could not be evaluated" in report.rule_violations[0]["message"]
    not_json = check_step(world, CALL, "the refund went through")
    assert "not JSON" in not_json.rule_violations[0]["message"]


def test_anchors_must_hold_their_pinned_values():
    world = parse_world(shop_world(rules=[]))
    response = '{"status": "ok", "refund_processed": true, "amount": 30, "items": [{"sku": "S1", "price": 12.5}]}'
    assert check_step(world, CALL, response, anchors=parse_anchors(["amount=30.0", "items[0].price=12.5", 'status="ok"'])).ok
    report = check_step(world, CALL, response, anchors=parse_anchors(['amount="30"', "refund_processed=1", "items[1].sku=\"S2\""]))
    assert report.anchor_violations == [
        'amount: is 30, pinned to "30"',
        "refund_processed: is true, pinned to 1",
        'items[1].sku: missing, pinned to "S2"',
    ]
    assert not report.ok
    broken = check_step(world, CALL, "{oops", anchors=[Anchor("status", "error")])
    assert broken.anchor_violations == ['status: pinned to "error", but the response is not JSON']


def test_json_equality_treats_numbers_as_numbers_only():
    assert json_equal(1, 1.0) and json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal("1", 1) and not json_equal(True, 1) and not json_equal(False, 0)
    assert not json_equal(None, 0) and not json_equal([1, 2], [2, 1]) and not json_equal({"a": 1}, {"a": 1, "b": 2})


def test_a_call_to_an_unknown_tool_is_bad_input_naming_the_known_tools():
    world = parse_world(shop_world())
    with pytest.raises(InvalidInput) as err:
        check_step(world, Call("cancel_order"), "{}")
    assert err.value.problems[0].path == "call.name"
    assert "cancel_order" in str(err.value) and "refund_order, get_order" in str(err.value)
    with pytest.raises(InvalidInput, match=r"history\[0\]\.call\.name"):
        parse_history([{"call": {}, "response": "{}"}])  # histories are parsed where they come in


def test_parse_anchor_reads_json_values_and_explains_the_quoted_form():
    assert parse_anchor('status="error"') == Anchor("status", "error")
    assert parse_anchor("refund_processed=false") == Anchor("refund_processed", False)
    assert parse_anchor(" items[0].price = 12.5 ") == Anchor("items[0].price", 12.5)
    assert parse_anchor("meta={\"a\": [1, null]}") == Anchor("meta", {"a": [1, None]})
    assert parse_anchor("['odd=key']=1") == Anchor("['odd=key']", 1)
    with pytest.raises(InvalidInput) as err:
        parse_anchor("status=error")
    assert 'status="error"' in str(err.value) and "anchor status=error" in str(err.value)
    for bad in ["status", "=1", "status=", "items[x]=1", "amount=NaN"]:
        with pytest.raises(InvalidInput, match="anchor"):
            parse_anchor(bad)
    with pytest.raises(InvalidInput) as many:
        parse_anchors(["status=error", "ok=true", "n=1 2"])
    assert len(many.value.problems) == 2


@pytest.mark.parametrize(
    ("anchor", "expected"),
    [
        ('status="error"', None),
        ("items[0].price=12.5", None),
        ("items[3].qty=2", None),
        ("page.next=2", None),
        ("page=null", None),
        ("amount=3", None),
        ('status="failed"', 'expected one of "ok", "error"'),
        ('refund_processed="false"', "expected a boolean"),
        ('items[0].price="12.50"', "expected a number"),
        ("items[0].qty=1.5", "expected an integer"),
        ("stauts=\"ok\"", "no field `stauts` in the response (fields: status, refund_processed, amount, items, page)"),
        ("items[0].colour=\"red\"", "no field `colour` in items[0] (fields: sku, price, qty)"),
        ("page.nxt=1", "no field `nxt` in page (fields: next)"),
        ("items.price=1", "items is a list, not an object"),
        ("status[0]=1", "not a list"),
    ],
)
def test_anchor_problems_follow_the_response_schema(anchor, expected):
    problems = anchor_problems([parse_anchor(anchor)], RESPONSE_SCHEMA)
    if expected is None:
        assert problems == []
    else:
        assert len(problems) == 1 and expected in problems[0].message
        assert problems[0].path == f"anchor {parse_anchor(anchor).path}"


def test_anchor_problems_need_a_schema_to_check_against():
    assert anchor_problems([parse_anchor("anything.at[2].all=1")], None) == []
    open_schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    assert anchor_problems([parse_anchor("count=3")], open_schema) == []
    assert "expected an integer" in anchor_problems([parse_anchor('count="3"')], open_schema)[0].message


def write(path, data) -> str:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return str(path)


def test_cli_check_exit_codes_for_ok_and_violations(tmp_path):
    world = write(tmp_path / "world.json", shop_world())
    call = write(tmp_path / "call.json", CALL.to_json())
    good = write(tmp_path / "good.json", '{"refund_processed": false, "status": "error"}')
    bad = write(tmp_path / "bad.json", '{"refund_processed": true, "status": "error"}')
    runner = CliRunner()
    ok = runner.invoke(app, ["check", world, "--call", call, "--response", good, "--anchor", 'status="error"'])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["ok"] is True
    caught = runner.invoke(app, ["check", world, "--call", call, "--response", bad, "--anchor", 'status="error"'])
    assert caught.exit_code == 1, caught.output
    report = json.loads(caught.stdout)
    assert report["rule_violations"] == [{"rule": REFUND_RULE, "message": "check is false"}]
    pinned = runner.invoke(app, ["check", world, "--call", call, "--response", good, "--anchor", 'status="ok"'])
    assert pinned.exit_code == 1 and json.loads(pinned.stdout)["anchor_violations"]


def test_cli_check_reports_bad_input_with_exit_code_2(tmp_path):
    world = write(tmp_path / "world.json", shop_world())
    broken_cel = write(tmp_path / "broken_cel.json", shop_world(rules=[
        {"text": "fine", "check": "response.amount >= 0"},
        {"text": REFUND_RULE, "check": 'response.status != "error" ||'},
    ]))
    bad_json_world = write(tmp_path / "bad_world.json", '{"name": "shop", "tools": [,]}')
    call = write(tmp_path / "call.json", CALL.to_json())
    good = write(tmp_path / "good.json", '{"refund_processed": false, "status": "error"}')
    absent = str(tmp_path / "absent.json")
    runner = CliRunner()
    cases = [
        (["check", world, "--call", call, "--response", absent], ["absent.json", "no such file"]),
        (["check", bad_json_world, "--call", call, "--response", good], ["bad_world.json:1:", "invalid JSON"]),
        (["check", broken_cel, "--call", call, "--response", good], ["rules[1].check", "line 1, column"]),
        (["check", world, "--call", call, "--response", good, "--anchor", "status=error"], ['status="error"']),
        (["check", world, "--call", write(tmp_path / "c2.json", {"name": "nope"}), "--response", good],
         ["call.name", "refund_order, get_order"]),
    ]
    for args, messages in cases:
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output
        for message in messages:
            assert message in result.stderr, (message, result.stderr)


def test_cli_check_refuses_an_anchor_the_response_schema_forbids_as_generate_does(tmp_path):
    world = write(tmp_path / "world.json", shop_world())
    call = write(tmp_path / "call.json", CALL.to_json())
    response = write(tmp_path / "response.json", '{"refund_processed": false, "status": "error"}')
    runner = CliRunner()
    cases = [('status="failed"', "anchor status: "), ("refund_processed=3", "anchor refund_processed: "),
             ("nonexistent=1", "anchor nonexistent: ")]
    for text, where in cases:
        result = runner.invoke(app, ["check", world, "--call", call, "--response", response, "--anchor", text])
        assert result.exit_code == 2, (text, result.output)
        assert result.stdout == "" and where in result.stderr
        assert result.stderr.removeprefix("error: ").startswith(where)
        assert [p.message for p in anchor_problems([parse_anchor(text)], RESPONSE_SCHEMA)][0] in result.stderr


def test_a_macro_over_a_value_that_is_not_a_list_is_a_violation_not_a_crash():
    world = parse_world(shop_world([{"text": "items are priced", "check": "response.items.all(i, i.price > 0)"}]))
    call = Call("refund_order", {"order_id": "A1"})
    for items in ("5", "null", '"many"'):
        report = check_step(world, call, '{"status": "ok", "refund_processed": true, "items": %s}' % items)
        assert not report.ok and report.rule_violations[0]["rule"] == "items are priced"
        assert "not a list" in report.rule_violations[0]["message"] or "could not be evaluated" in \
            report.rule_violations[0]["message"]
