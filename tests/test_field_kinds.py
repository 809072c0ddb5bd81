"""Field kinds: every leaf of a true response is classed by where its value comes from and scored exactly."""

from __future__ import annotations

from wmstudio.train.world_model.field_kinds import FieldScores, classify, enum_options, field_leaves, prompt_values

CALL = prompt_values({"order_id": "ORD-7", "amount_cents": 500})
SHOWN = prompt_values({"orders": [{"id": "ORD-7", "total_cents": 4599, "status": "delivered", "sku": "SKU-1"}]})
ENUMS = {"order_status": ["", "pending", "delivered"]}


def kind(path, value):
    return classify(path, value, CALL, SHOWN, ENUMS)


def test_each_leaf_is_classed_by_where_its_value_comes_from():
    assert kind(("status",), "ok") == "status" and kind(("error",), "NOT_FOUND") == "error_code"
    assert kind(("order_id",), "ORD-7") == "copy_call"  # the call wins over the state that holds it too
    assert kind(("items", 0, "sku"), "SKU-1") == "copy_state"
    assert kind(("amount",), 500) == "number_in_prompt" and kind(("total",), 4599.0) == "number_in_prompt"
    assert kind(("remaining",), 4099) == "derived_number"
    assert kind(("refunded",), True) == "bool" and kind(("message",), "") == "neutral"
    assert kind(("count",), 0) == "neutral" and kind(("items",), []) == "neutral"
    assert kind(("order_status",), "pending") == "enum" and kind(("refund_id",), "RF-1") == "text"
    assert kind(("nested", "status"), "ok") == "text"  # only the top-level status is the outcome


def test_scores_are_exact_per_kind_and_recall_counts_filled_fields():
    truth = {"order_id": "ORD-7", "refund_id": "RF-1", "amount": 500, "refunded": True, "message": "",
             "status": "ok"}
    scores = FieldScores()
    scores.add(truth, {"order_id": "ORD-7", "refund_id": "", "amount": 500.0, "refunded": False, "message": "",
                       "status": "ok"}, CALL, SHOWN, ENUMS)
    accuracy = scores.accuracy()
    assert accuracy["copy_call"] == 1.0 and accuracy["number_in_prompt"] == 1.0  # 500 == 500.0 as JSON
    assert accuracy["text"] == 0.0 and accuracy["bool"] == 0.0 and accuracy["status"] == 1.0
    assert accuracy["enum"] is None  # no field of that kind
    assert scores.recall() == 3 / 5  # order_id, amount, status filled; refund_id and refunded not
    scores.add(truth, None, CALL, SHOWN, ENUMS)  # not JSON: every field wrong
    assert scores.accuracy()["copy_call"] == 0.5


def test_recall_counts_only_what_the_simulator_fills_an_ok_answers_empty_error_code_is_not_filled():
    truth = {"order_id": "ORD-7", "error": "", "message": "", "status": "ok"}
    scores = FieldScores()
    scores.add(truth, {"order_id": "ORD-7", "error": "", "message": "", "status": "ok"}, CALL, SHOWN, ENUMS)
    assert scores.recall() == 1.0 and scores.accuracy()["error_code"] == 1.0  # the empty code is still scored
    failed = FieldScores()
    failed.add({"order_id": "", "error": "NOT_FOUND", "status": "error"}, {"order_id": "", "error": "",
                                                                          "status": "error"}, CALL, SHOWN, ENUMS)
    assert failed.recall() == 1 / 2  # the error code the simulator wrote is a filled field; the model left it empty


def test_leaves_and_enum_options_reach_inside_lists_and_objects():
    assert list(field_leaves({"a": [{"b": 1}, {"b": 2}], "c": []})) == [(("a", 0, "b"), 1), (("a", 1, "b"), 2),
                                                                        (("c",), [])]
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"kind": {"type": "string", "enum": ["a", "b"]}}}}}}
    assert enum_options(schema) == {"kind": ["a", "b"]}
