"""A world's patterns never cost more than linear time (issue 52): JSON Schema `pattern` / `patternProperties` and
the rules' `matches` are matched by RE2, automata are built under a state and time cap and agree with RE2 on what
they accept, and a pattern that cannot be run or compiled is refused where the world is read, naming its field."""

from __future__ import annotations

import random

import pytest
import re2

from wmstudio.problems import InvalidInput
from wmstudio.store.scenarios import success_problem
from wmstudio.store.seeding import demo_worlds
from wmstudio.world.rules.cel import MAX_CHECK_DEPTH, cel_syntax_problem, evaluate_check
from wmstudio.world.rules.patterns import nearest_match, shortest_text
from wmstudio.world.spec import parse_world
from wmstudio.world.tools.linear_patterns import pattern_problems, validator_for
from wmstudio.world.tools.regex_automata import (
    MAX_DFA_STATES,
    PatternTooComplex,
    PatternUnsupported,
    automaton,
    build_budget,
    search_regex,
)

PATTERNS = ["^(ch_[A-Za-z0-9]{14})?$", "^[A-Z]{3}-\\d{4,6}$", "ab|a(b|c)*d", "^(a+)+$", "[^x]y?z{2}",
            "^\\w+@\\w+\\.(com|org)$", "^(?i)abc$", "x.*y", "^$", "\\s\\S\\d\\D", "^(\\d{4}-(0[1-9]|1[0-2]))?$"]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_an_automaton_accepts_exactly_what_re2_matches(pattern):
    fsm = automaton(search_regex(pattern))
    program = re2.compile(pattern)
    rng = random.Random(pattern)
    alphabet = "abcdxyzABC_-@.0123456789 \t" + "ch_ORGcomorg"
    texts = ["", "ch_ABCDEFGHIJKLMN", "ABC-12345", "abd", "acccd", "aaaa", "yzz", "me@host.com", "ABC", "2025-07",
             *("".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 18))) for _ in range(400))]
    for text in texts:
        state = fsm.start
        for ch in text:
            state = fsm.step(state, ch) if state is not None else None
        accepted = state is not None and fsm.accepts(state)
        assert accepted == (program.search(text) is not None), (pattern, text)


def test_an_exploding_automaton_is_refused_at_the_cap_without_minutes_of_work():
    with pytest.raises(PatternTooComplex, match=f"{MAX_DFA_STATES:,} states"):
        automaton(search_regex("^.*a.{30}$"))  # 2^31 states if built whole
    with pytest.raises(PatternTooComplex, match="positions"):
        automaton(search_regex("(ab){3000}"))
    for pattern in ("(?=a)a", "(a)\\1", "\\bword\\b"):
        with pytest.raises(PatternUnsupported):
            automaton(search_regex(pattern))


def test_the_automata_of_one_request_share_one_budget_and_a_spent_one_is_not_remembered():
    with build_budget(0.0005), pytest.raises(PatternTooComplex, match="together"):
        automaton(search_regex("^[a-z]{0,990}y$"))  # about 30 ms to build
    assert automaton(search_regex("^[a-z]{0,990}y$")).states > 900  # built in full by the next request


def test_schema_checks_and_rule_matches_run_in_linear_time():
    """Python's `re` takes about 2^n steps for `^(a+)+$` on n a's and a `!`: at 60 characters, years."""
    schema = {"type": "object", "properties": {"m": {"type": "string", "pattern": "^(a+)+$"}},
              "patternProperties": {"^(b+)+$": {"type": "integer"}}, "additionalProperties": False}
    hostile = "a" * 60 + "!"
    errors = [error.message for error in validator_for(schema)(schema).iter_errors({"m": hostile, "b" * 60 + "!": 1})]
    assert any("does not match" in message for message in errors) and len(errors) == 2
    assert evaluate_check('response.m.matches("^(a+)+$")', {"response": {"m": hostile}}) == (False, "check is false")
    assert nearest_match("^(a+)+$", hostile) == "a" * 60 and shortest_text("^(ch_[a-z]{3})$") == "ch_aaa"


def test_a_world_with_a_pattern_that_cannot_be_run_is_refused_naming_the_field():
    retail = next(world for world in demo_worlds() if world.name == "retail").to_json()
    tool = retail["tools"][0]["function"]
    tool["response"]["properties"]["message"] = {"type": "string", "pattern": "^(?=a)a+$"}
    tool["parameters"]["properties"]["order_id"]["pattern"] = "^.*a.{14}$"
    with pytest.raises(InvalidInput) as refused:
        parse_world(retail)
    paths = {problem.path for problem in refused.value.problems}
    assert paths == {"tools[0].function.response.properties.message.pattern",
                     "tools[0].function.parameters.properties.order_id.pattern"}
    said = " ".join(problem.message for problem in refused.value.problems)
    assert "cannot be matched in linear time" in said and "too complex" in said
    assert pattern_problems({"patternProperties": {"(a)\\1": {}}}, "response") != []
    assert pattern_problems({"properties": {"id": {"pattern": "^ORD-\\d+$"}}}, "response") == []


def test_a_check_nested_too_deep_is_refused_wherever_checks_are_written():
    deep = "(" * 1500 + "true" + ")" * 1500
    problem = cel_syntax_problem(deep, "rules[0].check")
    assert problem.path == "rules[0].check" and f"over {MAX_CHECK_DEPTH} levels" in problem.message
    retail = next(world for world in demo_worlds() if world.name == "retail")
    assert success_problem(deep, retail).path == "success"  # a curriculum's success condition, too
    assert cel_syntax_problem("(" * 20 + "true" + ")" * 20) is None
    refused = cel_syntax_problem('response.m.matches("(a)\\\\1")', "rules[2].check")
    assert refused.path == "rules[2].check" and "linear time" in refused.message
