"""Property-based fuzzing of the CLI's parsers: world files, tool files, calls, responses, anchors and histories.

Whatever the input (well-formed, broken by a random edit, or laced with the hostile pieces of test_hostile_inputs),
the command ends with exit 0, 1 or 2 and never with a traceback. Bounded (~100 examples a parser) to run in CI."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import ASSETS_DIR

EXAMPLES = ASSETS_DIR / "examples"
WORLD, CALL, RESPONSE = (str(EXAMPLES / name) for name in ("refund-world.json", "refund-call.json",
                                                           "coherent-response.json"))
FUZZ = settings(max_examples=100, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
HOSTILE = ["[" * 3_000 + "]" * 3_000, "9" * 5_000, "NaN", "-Infinity", "1e400", '"\\ud800"', '"\\udc00x"',
           "a: &a [*a]", "- " * 500 + "x", '{"a": ' * 200 + "1" + "}" * 200, "\x00", "\ufeff{}", "\\", "\""]
runner = CliRunner()
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "wmstudio-hypothesis")  # its caches stay out of the checkout

scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=16)
names = st.sampled_from(["refund_order", "get_order", "", "x" * 70]) | st.text(max_size=10)
cel = st.sampled_from(['response.status != "error" || response.refund_processed == false', "response.total >= 0",
                       "size(history) < 3", "[1,2,3].all(x, x > 0)", "state.orders[0].id == call.arguments.order_id"]) \
    | st.text(alphabet='responsetaiz.()[]{}<>=!&|+-*/ 0129"\'', max_size=40)
schemas = st.fixed_dictionaries({"type": st.sampled_from(["object", "string", "strng", "integer", "array"])},
                                optional={"properties": st.dictionaries(st.text(max_size=6), values, max_size=3),
                                          "required": st.lists(st.text(max_size=6), max_size=2),
                                          "items": values, "$ref": st.sampled_from(["#/$defs/X", "#", "http://x"])})
tools = st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
    {"name": names}, optional={"description": st.text(max_size=20), "parameters": schemas | values,
                               "response": schemas | values})}) | values
worlds = st.fixed_dictionaries({"name": st.text(max_size=10) | values}, optional={
    "task": st.text(max_size=20) | values, "initial_state": values, "tools": st.lists(tools, max_size=3) | values,
    "rules": st.lists(st.fixed_dictionaries({"text": st.text(max_size=10)}, optional={"check": cel}) | values,
                      max_size=3),
    "directives": st.lists(st.text(max_size=10), max_size=2) | values})
calls = st.fixed_dictionaries({"name": names}, optional={
    "arguments": st.dictionaries(st.sampled_from(["order_id", "amount_cents", "x"]), values, max_size=3)
    | values | st.text(max_size=20)})
steps = st.fixed_dictionaries({"call": calls | values, "response": values | st.text(max_size=20)})
messages = st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool", "system", "x"])},
                                          optional={"content": st.text(max_size=20) | values,
                                                    "tool_calls": st.lists(st.fixed_dictionaries(
                                                        {"id": st.text(max_size=4), "function": calls}), max_size=2),
                                                    "tool_call_id": st.text(max_size=4)}), max_size=5)
histories = st.lists(steps, max_size=3) | messages | st.fixed_dictionaries({"traj": messages}) \
    | st.fixed_dictionaries({"messages": messages}) | values


@st.composite
def texts(draw, shapes: st.SearchStrategy, yaml_too: bool = False) -> str:
    """A JSON (or YAML) text of a drawn shape, sometimes edited at random or laced with a hostile piece."""
    value = draw(shapes)
    text = yaml.safe_dump(value) if yaml_too and draw(st.booleans()) else json.dumps(value, ensure_ascii=draw(
        st.booleans()))
    edit = draw(st.sampled_from(["none", "none", "insert", "delete", "hostile", "text"]))
    at = draw(st.integers(0, len(text)))
    if edit == "insert":
        text = text[:at] + draw(st.text(max_size=5)) + text[at:]
    elif edit == "delete":
        text = text[:at] + text[at + draw(st.integers(1, 5)):]
    elif edit == "hostile":
        text = text[:at] + draw(st.sampled_from(HOSTILE)) + text[at:]
    elif edit == "text":
        text = draw(st.text(max_size=40) | st.sampled_from(HOSTILE))
    return text


def run(argv: list[str], files: dict[str, str]) -> None:
    """Run the CLI on files written to a fresh folder; assert it ended as the README promises."""
    with tempfile.TemporaryDirectory() as folder:
        for name, text in files.items():
            (Path(folder) / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(folder) / name).write_text(text, encoding="utf-8", errors="surrogatepass")
        result = runner.invoke(app, [arg.replace("{tmp}", folder) for arg in argv])
    assert result.exit_code in (0, 1, 2), (argv, files, result.output[-3000:])
    assert result.exception is None or isinstance(result.exception, SystemExit), (argv, files, result.exception)
    assert "Traceback" not in result.output


@pytest.fixture(autouse=True)
def short_check_budget(monkeypatch):
    monkeypatch.setenv("WMSTUDIO_CHECK_SECONDS", "0.2")


@FUZZ
@given(texts(worlds))
def test_world_files(text):
    run(["validate", "{tmp}/w.json"], {"w.json": text})


@FUZZ
@given(texts(st.lists(tools, max_size=3) | st.fixed_dictionaries({"tools": st.lists(tools, max_size=3)}) | tools,
             yaml_too=True), st.sampled_from(["t.json", "t.jsonl", "t.yaml", "t.txt"]),
       st.sampled_from(["auto", "openai", "mcp", "bfcl", "yaml"]))
def test_tool_files(text, name, fmt):
    run(["tools", "import", "{tmp}/" + name, "--format", fmt], {name: text})


@FUZZ
@given(texts(calls))
def test_calls(text):
    run(["check", WORLD, "--call", "{tmp}/c.json", "--response", RESPONSE], {"c.json": text})


@FUZZ
@given(texts(st.fixed_dictionaries({"status": st.sampled_from(["ok", "error"]) | values},
                                   optional={"refund_processed": values}) | values))
def test_responses(text):
    run(["check", WORLD, "--call", CALL, "--response", "{tmp}/r.json"], {"r.json": text})


@FUZZ
@given(st.lists(st.sampled_from(["status", "refund_processed", "items[0].price", "", "a.b", "[0]"])
                .flatmap(lambda path: texts(values).map(lambda value: f"{path}={value}"))
                | st.text(max_size=30), max_size=3))
def test_anchors(anchors):
    run(["check", WORLD, "--call", CALL, "--response", RESPONSE, *[f"--anchor={a}" for a in anchors]], {})


@FUZZ
@given(texts(histories), st.sampled_from(["h.json", "h.jsonl"]))
def test_histories(text, name):
    run(["prompt", WORLD, "--call", CALL, "--history", "{tmp}/" + name], {name: text})


IMPORT_DB = str(Path(tempfile.mkdtemp(prefix="wmstudio-fuzz-")) / "studio.db")  # one database for every import
ACTION = json.dumps([{"role": "assistant", "content": "", "tool_calls": [
    {"id": "1", "type": "function", "function": {"name": "refund_order", "arguments": '{"order_id": 7}'}}]}])


@st.composite
def chat_rows(draw) -> dict:
    """A world-model chat row (Patronus format) whose state, action and response are drawn texts."""
    user = "State: " + draw(texts(messages)) + "\n\nAction: " + draw(texts(st.just(json.loads(ACTION)) | values))
    turns = [{"role": "user", "content": draw(st.just(user) | st.text(max_size=20))},
             {"role": "assistant", "content": draw(texts(values))}]
    return {"messages": draw(st.just(turns) | messages)}


dataset_rows = st.fixed_dictionaries({
    "rollout_id": st.just("r1") | values, "rollout_title": st.just("t") | values, "rollout_status": st.just("accepted"),
    "rollout_tags": st.just([]) | values, "step_index": st.just(0) | values,
    "world": texts(worlds) | st.just(Path(WORLD).read_text()), "call": texts(calls), "response": texts(values),
    "check_report": st.just("null") | texts(values), "made_by": st.just('{"kind": "imported"}') | texts(values)})


@FUZZ
@given(st.lists(texts(chat_rows() | values), min_size=1, max_size=3))
def test_chat_rows_import(lines):
    run(["rollouts", "import", "{tmp}/rows.jsonl", "--db", IMPORT_DB], {"rows.jsonl": "\n".join(lines)})


@FUZZ
@given(st.lists(texts(dataset_rows | values), min_size=1, max_size=3),
       st.lists(texts(st.fixed_dictionaries({"key": st.text(max_size=6) | values, "task": values})), max_size=2),
       st.sampled_from(["{tmp}/ds", "{tmp}/ds/data/train.jsonl"]))
def test_dataset_import(lines, scenarios, path):
    files = {"ds/data/train.jsonl": "\n".join(lines), "ds/README.md": "---\npretty_name: fuzz v1\n---\n"}
    if scenarios:
        files["ds/scenarios.jsonl"] = "\n".join(scenarios)
    run(["curricula", "import", path, "--db", IMPORT_DB], files)
