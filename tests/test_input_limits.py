"""The input limits one by one: what passes just under each, what is refused just over it, and the message.

The CLI's view of the same inputs is in test_hostile_inputs.py; here are the functions every reader shares."""

from __future__ import annotations

import gc
import json
import time

import pytest
import yaml

from wmstudio.problems import InvalidInput
from wmstudio.world.input_limits import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_CHARS,
    MAX_YAML_BYTES,
    YAML_DEPTH_COUNTED,
    InputRefused,
    check_seconds,
    json_depth,
    loads_limited,
    read_limited,
    yaml_limited,
)
from wmstudio.world.rules.budget import check_clock
from wmstudio.world.rules.cel import cel_syntax_problem, evaluate_check
from wmstudio.world.spec import parse_world


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_json_depth_skips_brackets_inside_strings():
    assert json_depth('{"a": "[[[{{", "b": [1, {"c": "\\"]]"}]}') == 3
    assert json_depth("[]") == 1 and json_depth('"text"') == 0


def test_nesting_up_to_the_limit_is_read_and_one_more_level_is_refused():
    assert loads_limited(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(InputRefused, match=f"nested {MAX_JSON_DEPTH + 1} levels deep, over the 100-level limit"):
        loads_limited(nested(MAX_JSON_DEPTH + 1))


def test_numbers_keep_to_their_length_and_to_what_a_float_holds():
    assert loads_limited("1" * MAX_NUMBER_CHARS) == int("1" * MAX_NUMBER_CHARS)
    with pytest.raises(InputRefused, match="a number of 101 digits"):
        loads_limited("1" * (MAX_NUMBER_CHARS + 1))
    with pytest.raises(InputRefused, match="the number -1e999 is too large to hold"):
        loads_limited('{"x": -1e999}')
    assert loads_limited("[1.5e300, -0.0, 12]") == [1.5e300, -0.0, 12]


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_are_bad_json_with_a_position(constant):
    with pytest.raises(json.JSONDecodeError) as caught:
        loads_limited('{"total":\n ' + constant + "}")
    assert caught.value.msg == f"{constant} is not JSON, write null or a number"
    assert (caught.value.lineno, caught.value.colno) == (2, 2)


def test_lone_surrogates_are_refused_where_they_are_and_pairs_are_characters():
    assert loads_limited('["\\ud83d\\ude00"]') == ["\U0001F600"]
    with pytest.raises(InputRefused, match=r"^items\[1\]\.name: holds a lone surrogate \(\\udc00\)"):
        loads_limited('{"items": [{}, {"name": "a\\udc00"}]}')
    with pytest.raises(InputRefused, match=r"^line 2, column 4: holds a lone surrogate \(\\ud800\)"):
        loads_limited('[\n  "\ud800"]')


def test_a_world_holding_a_lone_surrogate_is_refused_before_it_can_be_saved():
    with pytest.raises(InvalidInput) as caught:
        parse_world({"name": "w", "directives": ["ok", "bad \ud800"]})
    assert str(caught.value).startswith("directives[1]: holds a lone surrogate (\\ud800)")


def test_files_are_refused_before_reading_when_too_big_and_streams_after_the_limit(tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * 1_001)
    assert read_limited(big, 1_001) == b" " * 1_001
    with pytest.raises(InvalidInput, match="big.json: file is 1,001 bytes, over the 1,000-byte limit for a test: trim"):
        read_limited(big, 1_000, "for a test", "trim")
    with pytest.raises(InvalidInput, match="reading it gave more than the 1,000-byte limit \\(it is a device or pipe"):
        read_limited("/dev/zero", 1_000)
    with pytest.raises(InvalidInput, match="is a folder, not a file"):
        read_limited(tmp_path, 1_000)


def test_yaml_aliases_may_repeat_values_but_not_explode():
    assert yaml_limited("base: &b {type: string}\na: *b\nb: *b\n") == {"base": {"type": "string"},
                                                                       "a": {"type": "string"},
                                                                       "b": {"type": "string"}}
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))
    started = time.perf_counter()
    with pytest.raises(InputRefused, match="expand it to over 500,000 values"):
        yaml_limited(bomb)
    assert time.perf_counter() - started < 5  # refused from the node graph, before anything is copied


def test_yaml_is_refused_when_too_big_too_deep_or_holding_numbers_json_cannot():
    with pytest.raises(InputRefused, match=f"over the {MAX_YAML_BYTES:,}-byte limit for YAML"):
        yaml_limited("a: b\n" * (MAX_YAML_BYTES // 5 + 1))
    with pytest.raises(InputRefused, match="nested 101 levels deep"):
        yaml_limited("- " * 101 + "x")
    assert yaml_limited("- " * 99 + "x") is not None
    with pytest.raises(InputRefused, match=r"\.inf is not a JSON number"):
        yaml_limited("total: .inf")
    with pytest.raises(InputRefused, match="a value cannot be read \\(day is out of range for month\\)"):
        yaml_limited("when: 2001-02-30")
    with pytest.raises(yaml.YAMLError):
        yaml_limited("a: [")


def test_a_check_over_the_length_limit_is_refused_without_compiling_it():
    started = time.perf_counter()
    problem = cel_syntax_problem("response.a > 0 && " * 60_000 + "true", "rules[0].check")
    assert time.perf_counter() - started < 1
    assert str(problem) == "rules[0].check: the check is 1,080,004 characters, over the 4,096-character limit: " \
                           "split it into several rules"
    holds, why = evaluate_check("true && " * 600 + "true", {})
    assert not holds and why.startswith("check not run: the check is 4,804 characters")


def test_a_slow_check_stops_at_its_budget_and_says_how_to_change_it(monkeypatch):
    monkeypatch.setenv("WMSTUDIO_CHECK_SECONDS", "0.1")
    assert check_seconds() == 0.1
    ten = "[1,2,3,4,5,6,7,8,9,10]"
    started = time.perf_counter()
    holds, why = evaluate_check(f"{ten}.all(a, {ten}.all(b, {ten}.all(c, {ten}.all(d, a + b + c + d > 0))))", {})
    assert time.perf_counter() - started < 5
    assert not holds and why.startswith("check stopped after 0.1 s of CPU time, its budget") and \
        "WMSTUDIO_CHECK_SECONDS" in why
    assert evaluate_check(f"{ten}.all(a, a > 0)", {}) == (True, None)  # a quick check is unaffected
    for bad in ("0", "-1", "soon", "nan"):
        monkeypatch.setenv("WMSTUDIO_CHECK_SECONDS", bad)
        assert check_seconds() == 2.0


def test_time_in_the_garbage_collector_is_not_charged_to_a_check():
    """A full collection in a large process (late in a test run: seconds) once stopped an 831-node check."""
    heap = [[i] for i in range(1_000_000)]
    cpu, clock = time.thread_time(), check_clock()
    gc.collect()
    collecting = time.thread_time() - cpu
    assert collecting > 0.03 and check_clock() - clock < collecting / 5, (collecting, check_clock() - clock)
    del heap


def test_values_a_check_cannot_read_are_reported_not_raised():
    assert evaluate_check("response.n > 0", {"response": {"n": 2**63}}) == (
        False, "check not run: the response holds a whole number beyond CEL's 64-bit range, which a check cannot "
               "read")
    deep: list = []
    for _ in range(5_000):
        deep = [deep]
    assert evaluate_check("size(state) > 0", {"state": deep}) == (
        False, "check not run: the initial state is nested too deeply for a check to read it")


def test_compiled_checks_are_cached_within_a_character_budget(monkeypatch):
    from wmstudio.world.rules import cel as rules

    monkeypatch.setattr(rules, "CACHE_CHARS", 5_000)
    monkeypatch.setattr(rules, "_CACHE", type(rules._CACHE)())
    checks = [f"response.n != {i} || " + "true && " * 50 + "true" for i in range(30)]  # ~420 characters each
    for check in checks:
        assert evaluate_check(check, {"response": {"n": -1}}) == (True, None)
    held = list(rules._CACHE)
    assert sum(map(len, held)) <= 5_000 and held == checks[-len(held):]  # the most recently used stay


def test_the_store_names_a_lone_surrogate_instead_of_failing_to_write_it(tmp_path):
    from wmstudio.store import MadeBy, append_step, create_rollout, open_store, save_world_version
    from wmstudio.world.spec import Call

    store = open_store(tmp_path / "studio.db")
    rollout = create_rollout(store, save_world_version(store, parse_world({"name": "w"})).id, "ok")
    attempts = {
        "response: holds a lone surrogate": lambda: append_step(store, rollout.id, Call("x", {}), "a \ud800",
                                                                 MadeBy.by_hand("ann")),
        "call.arguments.q[0]: holds": lambda: append_step(store, rollout.id, Call("x", {"q": ["\udcff"]}), "{}",
                                                          MadeBy.by_hand("ann")),
        "title: holds": lambda: create_rollout(store, rollout.world_id, "t \ud800"),
        "tags[1]: holds": lambda: create_rollout(store, rollout.world_id, "t", ["ok", "\udfff"]),
    }
    for expected, attempt in attempts.items():
        with pytest.raises(InvalidInput, match=expected.replace("[", "\\[").replace("]", "\\]")):
            attempt()


def test_yaml_nesting_past_the_counted_depth_reads_the_same_whatever_pyyaml_bundles():
    # PyYAML 6.0.4's libyaml refuses 1,000 levels with its own words; 6.0.3's reads them: the message is ours in both
    for levels in (YAML_DEPTH_COUNTED + 1, 999, 1_000, 200_000):
        with pytest.raises(InputRefused, match=f"^nested more than {YAML_DEPTH_COUNTED} levels deep, over the "
                                               f"{MAX_JSON_DEPTH}-level limit: flatten it$"):
            yaml_limited("- " * levels + "x\n")
