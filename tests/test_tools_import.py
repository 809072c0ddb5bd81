"""Tool import from real third-party files and hand-built quirks: counts, valid schemas, clear messages.

Sample files are upstream copies in ../shared/samples (see its SOURCES.md); variants are built here in code."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.problems import InvalidInput
from wmstudio.world.spec import parse_world
from wmstudio.world.tools import (
    FORMATS,
    MAX_TOOLS_FILE_BYTES,
    ImportResult,
    Tool,
    detect_format,
    import_tools_file,
    parse_tools,
)

SAMPLES = Path(__file__).resolve().parents[1].parent / "shared" / "samples"
FUNC_DOCS = SAMPLES / "bfcl" / "multi_turn_func_doc"

# Acceptance figures: tools imported from each sample file (observed, then checked by hand).
EXPECTED_COUNTS = {
    "bfcl/multi_turn_func_doc/gorilla_file_system.json": 18,
    "bfcl/multi_turn_func_doc/math_api.json": 17,
    "bfcl/multi_turn_func_doc/memory_kv.json": 15,
    "bfcl/multi_turn_func_doc/memory_rec_sum.json": 5,
    "bfcl/multi_turn_func_doc/memory_vector.json": 12,
    "bfcl/multi_turn_func_doc/message_api.json": 10,
    "bfcl/multi_turn_func_doc/posting_api.json": 14,
    "bfcl/multi_turn_func_doc/ticket_api.json": 9,
    "bfcl/multi_turn_func_doc/trading_bot.json": 20,
    "bfcl/multi_turn_func_doc/travel_booking.json": 18,
    "bfcl/multi_turn_func_doc/vehicle_control.json": 22,
    "bfcl/multi_turn_func_doc/web_search.json": 2,
    "bfcl/BFCL_v3_multi_turn_base.sample.json": 128,
    "bfcl/BFCL_v4_live_simple.sample.json": 4,
    "bfcl/BFCL_v4_multi_turn_base.sample.json": 128,
    "bfcl/BFCL_v4_multiple.sample.json": 12,
    "bfcl/BFCL_v4_parallel.sample.json": 5,
    "bfcl/BFCL_v4_simple_java.sample.json": 5,
    "bfcl/BFCL_v4_simple_javascript.sample.json": 3,
    "bfcl/BFCL_v4_simple_python.sample.json": 4,
    "api-bank/apis.raw.extracted.json": 53,
    "api-bank/lv3_apis.raw.extracted.json": 22,
    "swe-agent-tools/tools/edit_anthropic/config.yaml": 1,
    "swe-agent-tools/tools/search/config.yaml": 3,
    "swe-agent-tools/tools/submit/config.yaml": 1,
    "swe-agent-tools/tools/web_browser/config.yaml": 17,
    "swe-agent-tools/tools/windowed/config.yaml": 5,
    "swe-agent-tools/tools/windowed_edit_replace/config.yaml": 2,
}
SAMPLE_FORMATS = {"bfcl": "bfcl", "api-bank": "api-bank", "swe-agent-tools": "swe-agent"}


def tool_files() -> list[str]:
    """Every sample file that holds tool definitions (or BFCL records that name them)."""
    patterns = ["bfcl/multi_turn_func_doc/*.json", "bfcl/BFCL_*.json", "api-bank/*.raw.extracted.json",
                "swe-agent-tools/tools/*/config.yaml"]
    return sorted(str(p.relative_to(SAMPLES)) for pattern in patterns for p in SAMPLES.glob(pattern))


def json_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def independent_count(relative: str) -> int:
    """Count the tools of a sample straight from the raw file, without the importer."""
    path = SAMPLES / relative
    if relative.startswith("bfcl/multi_turn_func_doc/"):
        return len(json_lines(path))
    if relative.startswith("bfcl/"):
        records = json_lines(path)
        if "function" in records[0]:
            return len({doc["name"] for record in records for doc in record["function"]})
        from wmstudio.world.tools.formats.bfcl import CLASS_FILES  # the class -> file table is BFCL's, not a result

        classes = {cls for record in records for cls in record["involved_classes"]}
        return len({doc["name"] for cls in classes for doc in json_lines(FUNC_DOCS / CLASS_FILES[cls])})
    if relative.startswith("api-bank/"):
        return len(json.loads(path.read_text(encoding="utf-8")))
    return len(yaml.safe_load(path.read_text(encoding="utf-8"))["tools"])


def by_name(result: ImportResult) -> dict[str, Tool]:
    return {tool.name: tool for tool in result.tools}


def problem_text(excinfo: pytest.ExceptionInfo) -> str:
    return str(excinfo.value)


# --- every real sample -------------------------------------------------------------------------------

def test_the_count_table_covers_every_tool_sample():
    assert tool_files() == sorted(EXPECTED_COUNTS)


@pytest.mark.parametrize("relative", sorted(EXPECTED_COUNTS))
def test_sample_imports_with_valid_schemas_and_the_expected_count(relative):
    result = import_tools_file(SAMPLES / relative)
    assert len(result.tools) == EXPECTED_COUNTS[relative] == independent_count(relative)
    names = [tool.name for tool in result.tools]
    assert len(set(names)) == len(names)
    for tool in result.tools:
        assert tool.parameters["type"] == "object" and isinstance(tool.parameters["properties"], dict)
        Draft202012Validator.check_schema(tool.parameters)
        if tool.response is not None:
            Draft202012Validator.check_schema(tool.response)
        assert isinstance(tool.description, str)


@pytest.mark.parametrize("relative", sorted(EXPECTED_COUNTS))
def test_normalised_output_round_trips_unchanged(relative):
    tools = import_tools_file(SAMPLES / relative).tools
    again = parse_tools(json.loads(json.dumps([tool.to_json() for tool in tools])))
    assert again.tools == tools
    assert again.warnings == []


@pytest.mark.parametrize("relative", sorted(EXPECTED_COUNTS))
def test_auto_detection_names_the_sample_format_and_matches_an_explicit_format(relative):
    fmt = SAMPLE_FORMATS[relative.split("/")[0]]
    auto = import_tools_file(SAMPLES / relative)
    assert import_tools_file(SAMPLES / relative, fmt).tools == auto.tools
    if relative.endswith(".yaml"):
        raw = yaml.safe_load((SAMPLES / relative).read_text(encoding="utf-8"))
    elif relative.startswith("bfcl/"):
        raw = json_lines(SAMPLES / relative)
    else:
        raw = json.loads((SAMPLES / relative).read_text(encoding="utf-8"))
    assert detect_format(raw) == fmt


# --- BFCL quirks ---------------------------------------------------------------------------------------

def test_bfcl_dotted_name_is_sanitised_and_the_original_kept():
    result = import_tools_file(SAMPLES / "bfcl/BFCL_v4_simple_python.sample.json")
    tool = by_name(result)["random_forest_train"]
    assert tool.original_name == "random_forest.train"
    assert tool.to_json()["function"]["original_name"] == "random_forest.train"
    assert any("'random_forest.train'" in w and "renamed 'random_forest_train'" in w for w in result.warnings)


def test_bfcl_tuple_becomes_array_keeping_items_with_a_warning():
    result = import_tools_file(SAMPLES / "bfcl/BFCL_v4_simple_python.sample.json")
    coord = by_name(result)["calculate_distance"].parameters["properties"]["coord1"]
    assert coord["type"] == "array" and coord["items"] == {"type": "number"}
    expected = ("line 2: function[0] (calculate_distance): parameters.properties.coord1: type 'tuple' mapped to array "
                "(fixed length not kept)")
    assert expected in result.warnings


def test_bfcl_optional_in_all_three_spellings_leaves_the_parameter_out_of_required():
    python = by_name(import_tools_file(SAMPLES / "bfcl/BFCL_v4_simple_python.sample.json"))
    lawsuit = python["lawsuit_info"].parameters  # "optional": true on two properties
    assert lawsuit["required"] == ["case_number"]
    multiple = import_tools_file(SAMPLES / "bfcl/BFCL_v4_multiple.sample.json")
    tools = by_name(multiple)
    assert "region" not in tools["video_games_on_sale"].parameters.get("required", [])  # "optional": "True"
    neuron = tools["calculate_neuronal_activity"].parameters  # object-level "optional": ["weight"]
    assert neuron["required"] == ["input_synaptic_rate", "decay_rate"]
    assert "optional" not in neuron
    for tool in [*python.values(), *tools.values()]:
        assert all("optional" not in prop for prop in tool.parameters["properties"].values())
    assert any("non-standard `optional` dropped: weight left out of `required`" in w for w in multiple.warnings)


def test_bfcl_java_and_javascript_type_names():
    java = by_name(import_tools_file(SAMPLES / "bfcl/BFCL_v4_simple_java.sample.json"))
    proposals = java["SQLCompletionAnalyzer_makeProposalsFromObject"].parameters["properties"]
    assert proposals["params"]["type"] == "object"  # HashMap
    assert proposals["useShortName"]["type"] == "boolean"
    assert "type" not in proposals["object"]  # any -> {} plus its description
    assert java["FireBirdUtils_getViewSourceWithHeader"].parameters["properties"]["source"]["type"] == "string"
    js = import_tools_file(SAMPLES / "bfcl/BFCL_v4_simple_javascript.sample.json")
    options = by_name(js)["createAuthToken"].parameters["properties"]["options"]
    assert options["type"] == "object"
    assert options["properties"]["issuer"] == {"description": "The entity that issued the token."}  # "type": ""
    assert by_name(js)["validateUserInput"].parameters["properties"]["isComplete"]["type"] == "boolean"
    assert any("issuer: type '' mapped to {} (any value)" in w for w in js.warnings)


def test_bfcl_response_schema_becomes_the_tool_response():
    math = by_name(import_tools_file(SAMPLES / "bfcl/multi_turn_func_doc/math_api.json"))
    assert math["absolute_value"].response == {
        "type": "object",
        "properties": {"result": {"type": "number", "description": "The absolute value of the number."}},
    }


def test_bfcl_draft7_tuple_items_become_prefix_items():
    kv = by_name(import_tools_file(SAMPLES / "bfcl/multi_turn_func_doc/memory_kv.json"))
    ranked = kv["archival_memory_key_search"].response["properties"]["ranked_results"]
    assert ranked["items"]["prefixItems"] == [{"type": "number"}, {"type": "string"}]
    Draft202012Validator(kv["archival_memory_key_search"].response).validate({"ranked_results": [[1.5, "k"]]})


def test_bfcl_question_file_yields_the_union_of_functions_without_repeats():
    result = import_tools_file(SAMPLES / "bfcl/BFCL_v4_live_simple.sample.json")
    assert [t.name for t in result.tools] == ["get_user_info", "github_star", "uber_ride", "get_current_weather"]


def test_bfcl_multi_turn_tasks_import_the_tools_of_their_classes():
    tools = by_name(import_tools_file(SAMPLES / "bfcl/BFCL_v4_multi_turn_base.sample.json"))
    assert {"mv", "grep", "post_tweet", "send_message", "startEngine", "book_flight"} <= set(tools)
    assert "cp" in tools  # excluded in two tasks, but other tasks with GorillaFileSystem may call it


def test_bfcl_multi_turn_exclusions_hold_when_every_task_excludes(tmp_path):
    (tmp_path / "multi_turn_func_doc").mkdir()
    shutil.copy(FUNC_DOCS / "gorilla_file_system.json", tmp_path / "multi_turn_func_doc")
    tasks = tmp_path / "tasks.json"
    records = [{"id": f"t{i}", "question": [], "initial_config": {}, "path": [],
                "involved_classes": ["GorillaFileSystem"], "excluded_function": ["cp"]} for i in range(2)]
    tasks.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    names = {t.name for t in import_tools_file(tasks).tools}
    assert "cp" not in names and len(names) == 17


def test_memory_kv_and_memory_vector_share_names_so_together_they_clash():
    docs = json_lines(FUNC_DOCS / "memory_kv.json") + json_lines(FUNC_DOCS / "memory_vector.json")
    with pytest.raises(InvalidInput) as excinfo:
        parse_tools(docs)
    assert "tools[15]: duplicate tool name 'archival_memory_add', also used at tools[0]: rename or remove one" \
        in problem_text(excinfo)


# --- ToolEmu, MCP, tau, API-Bank, SWE-agent ------------------------------------------------------------

def gmail_toolkit() -> dict:
    """A toolkit in ToolEmu's published shape (assets/all_toolkits.json)."""
    return {
        "toolkit": "Gmail", "category": "Communication", "name_for_model": "Gmail", "name_for_human": "Gmail",
        "description_for_model": "Tool for managing emails.", "description_for_human": "Manage emails.",
        "tools": [
            {"name": "SendEmail", "summary": "Send an email to one or more recipients.",
             "parameters": [
                 {"name": "to", "type": "string", "description": "Comma-separated recipients.", "required": True},
                 {"name": "subject", "type": "string", "description": "The subject.", "required": True},
                 {"name": "cc", "type": "array", "description": "Carbon-copy recipients.", "required": False}],
             "returns": [{"name": "success", "type": "boolean", "description": "Whether it was sent."}],
             "exceptions": [{"name": "InvalidRequestException", "description": "A recipient is malformed."}]},
            {"name": "SearchEmails", "summary": "Search emails by keywords.",
             "parameters": [{"name": "keywords", "type": "array", "description": "Keywords.", "required": True},
                            {"name": "limit", "type": "integer", "description": "At most this many.",
                             "required": False, "default": 5}],
             "returns": [{"name": "emails", "type": "array", "description": "Matching emails."}],
             "exceptions": []},
        ],
    }


def test_toolemu_names_response_exceptions_and_required():
    result = parse_tools([gmail_toolkit()])
    tools = by_name(result)
    assert list(tools) == ["GmailSendEmail", "GmailSearchEmails"]
    send = tools["GmailSendEmail"]
    assert send.parameters["required"] == ["to", "subject"]
    assert send.response == {"type": "object", "properties": {
        "success": {"type": "boolean", "description": "Whether it was sent."}}, "required": ["success"]}
    assert "InvalidRequestException: A recipient is malformed." in send.description
    assert tools["GmailSearchEmails"].parameters["properties"]["limit"]["default"] == 5
    assert any("exceptions of 1 tool(s) written into their descriptions" in w for w in result.warnings)
    assert parse_tools(gmail_toolkit(), "toolemu").tools == result.tools  # a single toolkit object too
    assert detect_format([gmail_toolkit()]) == "toolemu"


def mcp_result() -> dict:
    return {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{
        "name": "get_weather", "title": "Weather", "description": "Current weather for a city.",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "outputSchema": {"type": "object", "properties": {"temperature": {"type": "number"}},
                         "required": ["temperature"]},
        "annotations": {"readOnlyHint": True}}]}}


def test_mcp_output_schema_becomes_the_response_in_every_wrapping():
    wrapped = parse_tools(mcp_result())
    tool = wrapped.tools[0]
    assert tool.parameters == {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    assert tool.response == {"type": "object", "properties": {"temperature": {"type": "number"}},
                             "required": ["temperature"]}
    assert parse_tools(mcp_result()["result"]).tools == [tool]
    assert parse_tools(mcp_result()["result"]["tools"], "mcp").tools == [tool]
    assert detect_format(mcp_result()) == "mcp"
    assert tool.annotations == {"title": "Weather", "readOnlyHint": True}  # the title kept beside the description
    assert wrapped.warnings == []


def test_mcp_next_cursor_warns_that_the_page_is_partial():
    page = {"tools": mcp_result()["result"]["tools"], "nextCursor": "abc"}
    assert any("nextCursor" in w for w in parse_tools(page).warnings)


def tau_tool() -> dict:
    """tau2-bench style: pydantic-made parameters with $defs, $ref, anyOf, titles and no `required`."""
    return {"type": "function", "function": {
        "name": "search_flights", "description": "Search direct flights.",
        "parameters": {
            "$defs": {"Leg": {"properties": {"origin": {"title": "Origin", "type": "string"},
                                             "date": {"title": "Date", "type": "string"}},
                              "required": ["origin", "date"], "title": "Leg", "type": "object"}},
            "properties": {
                "legs": {"items": {"$ref": "#/$defs/Leg"}, "title": "Legs", "type": "array"},
                "cabin": {"anyOf": [{"enum": ["economy", "business"], "type": "string"}, {"type": "null"}],
                          "default": None, "title": "Cabin"}},
            "title": "parameters", "type": "object"}}}


def test_tau_schemas_keep_defs_refs_and_any_of_valid_and_unchanged():
    result = parse_tools([tau_tool()], "tau")
    tool = result.tools[0]
    assert tool.parameters == tau_tool()["function"]["parameters"]
    assert "required" not in tool.parameters and result.warnings == []
    validator = Draft202012Validator(tool.parameters)
    assert validator.is_valid({"legs": [{"origin": "SFO", "date": "2024-05-01"}], "cabin": None})
    assert not validator.is_valid({"legs": [{"origin": "SFO"}]})  # the $ref'd Leg still requires `date`
    assert parse_tools([tau_tool()]).tools == result.tools


def test_api_bank_types_required_and_response():
    result = import_tools_file(SAMPLES / "api-bank/apis.raw.extracted.json")
    tools = by_name(result)
    translate = tools["Translate"].parameters
    assert translate["required"] == ["src"]  # src_lang and tgt_lang are described "[Optional] ..."
    assert tools["AddMeeting"].parameters["properties"]["attendees"]["items"] == {"type": "string"}  # list(str)
    best = tools["ToolSearcher"].response["properties"]["best_matchs"]
    assert best["anyOf"] == [{"type": "array", "items": {"type": "object"}}, {"type": "object"}]
    assert tools["AddAgenda"].response["required"] == ["status"]
    rule = [w for w in result.warnings if "declares no required parameters" in w]
    assert len(rule) == 1


def test_swe_agent_description_signature_arguments():
    result = import_tools_file(SAMPLES / "swe-agent-tools/tools/edit_anthropic/config.yaml")
    editor = result.tools[0]
    assert editor.name == "str_replace_editor"
    assert editor.description.startswith("Custom editing tool for viewing, creating and editing files")
    assert editor.description.endswith("Signature: str_replace_editor <command> <path> [<file_text>] [<view_range>] "
                                       "[<old_str>] [<new_str>] [<insert_line>]")
    props = editor.parameters["properties"]
    assert props["command"]["enum"] == ["view", "create", "str_replace", "insert", "undo_edit"]
    assert props["view_range"] == {"type": "array", "items": {"type": "integer"},
                                   "description": props["view_range"]["description"]}
    assert editor.parameters["required"] == ["command", "path"]
    assert "argument_format" not in json.dumps(editor.parameters) and result.warnings == []


# --- JSON-Schema fixes in hand-written OpenAI tools ------------------------------------------------------

def test_hand_written_openai_quirks_are_fixed_with_warnings():
    raw = [{"name": "pay", "description": "Pay.", "parameters": json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "properties": {"amount": {"type": "float", "required": True}, "note": {"type": ["string", "null"]}}})}]
    result = parse_tools(raw)
    assert result.tools[0].parameters == {
        "type": "object", "properties": {"amount": {"type": "number"}, "note": {"type": ["string", "null"]}},
        "required": ["amount"]}
    text = "\n".join(result.warnings)
    for expected in ("parameters given as JSON text", "`$schema` 'http://json-schema.org/draft-07/schema#' dropped",
                     "type 'float' is not JSON Schema: mapped to number", "`required: true` inside properties"):
        assert expected in text


@pytest.mark.parametrize("build", [gmail_toolkit, mcp_result, lambda: [tau_tool()]], ids=["toolemu", "mcp", "tau"])
def test_built_formats_round_trip_through_the_normalised_output(build):
    tools = parse_tools(build()).tools
    assert parse_tools([tool.to_json() for tool in tools]) == ImportResult(tools, [])


def test_world_files_take_tools_in_any_importable_format():
    world = parse_world({"name": "mail", "tools": [gmail_toolkit(), tau_tool(),
                                                   {"name": "math.factorial", "parameters": {
                                                       "type": "dict", "properties": {"n": {"type": "integer"}}}}]})
    assert [t.name for t in world.tools] == ["GmailSendEmail", "GmailSearchEmails", "search_flights",
                                             "math_factorial"]
    assert parse_world(json.loads(world.dumps())).tools == world.tools


# --- malformed input: each message names the place and says what to do ---------------------------------

def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


MALFORMED_FILES = [
    ("not-utf8", "tools.json", b'[{"name": "caf\xe9"}]', ["tools.json:1:", "not UTF-8", "save the file as UTF-8"]),
    ("empty", "tools.json", "  \n", ["tools.json: file is empty", "JSON Lines"]),
    ("bad-json", "tools.json", '[\n  {"name": "a"},\n  {"name": }\n]', ["tools.json:3:12: invalid JSON",
                                                                          "fix the syntax there"]),
    ("bad-json-lines", "docs.json", '{"name": "a"}\n{"name": "b",\n', ["docs.json:2:", "invalid JSON Lines record",
                                                                     "fix that line"]),
    ("bad-yaml", "config.yaml", "tools:\n  find:\n    docstring: [unclosed\n", ["config.yaml:", "invalid YAML"]),
    ("nameless-tool", "tools.json", '[{"name": "ok"}, {"description": "no name", "parameters": {}}]',
     ["[1].name: missing: every tool needs a `name`"]),
    ("nameless-jsonl", "docs.jsonl", '{"name": "ok"}\n{"description": "x", "parameters": {"type": "dict"}}\n',
     ["line 2: name: missing: every tool needs a `name`"]),
    ("unknown-type", "tools.json", ('[{"name": "f", "parameters": {"type": "object", "properties": '
                                   '{"city": {"type": "strng"}}}}]'),
     ["[0].parameters.properties.city.type: unknown type 'strng': did you mean 'string'?"]),
    ("parameters-not-object", "tools.json", '[{"name": "f", "parameters": {"type": "string"}}]',
     ["[0].parameters.type: parameters must be an object schema", "wrap the value"]),
    ("dangling-ref", "tools.json", ('[{"name": "f", "parameters": {"type": "object", "properties": '
                                   '{"leg": {"$ref": "#/$defs/Leg"}}}}]'),
     ["[0].parameters.properties.leg.$ref: '#/$defs/Leg' points nowhere", "add the definition under `$defs`"]),
    ("property-as-type-name", "tools.json", '[{"name": "f", "parameters": {"properties": {"city": "string"}}}]',
     ['[0].parameters.properties.city: a schema must be a JSON object, got text: write e.g. {"type": "string"}']),
    ("bad-required", "tools.json", '[{"name": "f", "parameters": {"type": "object", "required": "city"}}]',
     ["[0].parameters.required: must be a list of property names"]),
    ("unrecognised", "tools.json", '{"servers": []}', ["no tools found in an object with keys servers",
                                                       "tried bfcl, toolemu, mcp", "pass --format"]),
    ("json-rpc-error", "tools.json", ('{"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": '
                                     '"Method not found"}}'),
     ["error: a JSON-RPC error response ('Method not found') holds no tools", "tools/list"]),
    ("toolkit-without-prefix", "kit.json", '{"toolkit": "Gmail", "tools": [{"name": "Send"}], "name_for_model": ""}',
     ["name_for_model: missing", "Gmail + SendEmail -> GmailSendEmail"]),
    ("multi-turn-without-docs", "tasks.json", ('{"id": "t", "question": [], "initial_config": {}, '
                                              '"involved_classes": ["MathAPI"]}'),
     ["hold no tool definitions", "multi_turn_func_doc/ (math_api.json)", "import the task file"]),
]


@pytest.mark.parametrize("case,name,content,expected", MALFORMED_FILES, ids=[c[0] for c in MALFORMED_FILES])
def test_malformed_file_gets_a_message_naming_the_place_and_the_fix(tmp_path, case, name, content, expected):
    path = write(tmp_path, name, content)
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(path)
    message = problem_text(excinfo)
    assert str(path) in message
    for fragment in expected:
        assert fragment in message


def test_huge_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(MAX_TOOLS_FILE_BYTES + 1)  # sparse: no 20 MB written
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(path)
    assert f"{path}: file is {MAX_TOOLS_FILE_BYTES + 1:,} bytes, over the {MAX_TOOLS_FILE_BYTES:,}-byte limit" \
        in problem_text(excinfo)


def test_unknown_format_lists_the_known_ones(tmp_path):
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(write(tmp_path, "t.json", "[]"), "xml")
    assert problem_text(excinfo) == f"unknown format 'xml': use one of {', '.join(FORMATS)} (--format)"


def test_a_format_that_does_not_fit_suggests_the_right_one():
    path = SAMPLES / "bfcl/BFCL_v4_simple_python.sample.json"
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(path, "mcp")
    assert "none of the 4 entries looks like mcp" in problem_text(excinfo)
    assert "use --format bfcl or --format auto" in problem_text(excinfo)
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(SAMPLES / "swe-agent-tools/tools/search/config.yaml", "openai")
    assert "a SWE-agent bundle, not openai: use --format swe-agent" in problem_text(excinfo)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(InvalidInput, match="no such file"):
        import_tools_file(tmp_path / "absent.json")
    with pytest.raises(InvalidInput, match="is a folder: give one tool file"):
        import_tools_file(tmp_path)


def test_all_problems_of_a_list_are_reported_at_once():
    with pytest.raises(InvalidInput) as excinfo:
        parse_tools([{"description": "a"}, {"name": "b", "parameters": {"type": "object", "properties": {
            "x": {"type": "strng"}}}}, 7])
    assert [p.path for p in excinfo.value.problems] == ["tools[0].name", "tools[1].parameters.properties.x.type",
                                                        "tools[2]"]
    assert excinfo.value.problems[2].message.startswith("not a tool in any known format (tried bfcl, toolemu, mcp, "
                                                        "api-bank, tau, openai, swe-agent)")


def test_names_that_collide_after_sanitising_are_a_problem_and_exact_repeats_a_warning():
    with pytest.raises(InvalidInput) as excinfo:
        parse_tools([{"name": "a.b"}, {"name": "a_b"}])
    expected = "tools[1]: duplicate tool name 'a_b', also used at tools[0] (from 'a.b'): rename or remove one"
    assert problem_text(excinfo) == expected
    repeated = parse_tools([{"name": "a"}, {"name": "a"}])
    assert [t.name for t in repeated.tools] == ["a"]
    assert repeated.warnings == ["tools[1]: tool 'a' repeats tools[0] exactly: dropped"]


def test_openai_built_in_tools_without_a_schema_are_skipped_with_a_warning():
    result = parse_tools([{"type": "web_search_preview"}, {"type": "function", "function": {"name": "f"}}])
    assert [t.name for t in result.tools] == ["f"]
    assert result.warnings == ["tools[0]: OpenAI built-in tool type 'web_search_preview' has no schema: skipped"]


def test_loose_formats_map_unknown_types_to_any_value_with_a_warning():
    result = parse_tools([{"name": "f", "parameters": {"type": "dict", "properties": {
        "ctrl": {"type": "IResultSetController", "description": "A controller."}}}}])
    assert result.tools[0].parameters["properties"]["ctrl"] == {"description": "A controller."}
    assert "tools[0] (f): parameters.properties.ctrl: unknown type 'IResultSetController' mapped to {} (any value)" \
        in result.warnings


# --- the CLI ------------------------------------------------------------------------------------------

def test_cli_prints_json_on_stdout_and_warnings_on_stderr():
    result = CliRunner().invoke(app, ["tools", "import", str(SAMPLES / "bfcl/BFCL_v4_simple_python.sample.json")])
    assert result.exit_code == 0
    printed = json.loads(result.stdout)
    assert [entry["function"]["name"] for entry in printed] == ["calculate_triangle_area", "calculate_distance",
                                                                "random_forest_train", "lawsuit_info"]
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines())
    assert "type 'tuple' mapped to array" in result.stderr


def test_cli_writes_the_output_file_with_an_explicit_format(tmp_path):
    out = tmp_path / "out" / "tools.json"
    result = CliRunner().invoke(app, ["tools", "import", str(SAMPLES / "swe-agent-tools/tools/search/config.yaml"),
                                      "--format", "swe-agent", "-o", str(out)])
    assert result.exit_code == 0 and result.stdout == ""
    written = json.loads(out.read_text(encoding="utf-8"))
    assert [entry["function"]["name"] for entry in written] == ["find_file", "search_dir", "search_file"]
    assert parse_tools(written).tools == import_tools_file(SAMPLES / "swe-agent-tools/tools/search/config.yaml").tools


def test_cli_exits_2_with_a_message_on_bad_input(tmp_path):
    bad = write(tmp_path, "bad.json", '[{"name": "f", "parameters": {"type": "object", "properties": '
                                      '{"a": {"type": "strng"}}}}]')
    result = CliRunner().invoke(app, ["tools", "import", str(bad)])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.startswith(f"error: {bad}: [0].parameters.properties.a.type: unknown type 'strng'")
    result = CliRunner().invoke(app, ["tools", "import", str(bad), "--format", "yaml"])
    assert result.exit_code == 2 and "unknown format 'yaml': use one of auto, bfcl" in result.stderr


# --- files from papers and benchmarks that used to import wrongly ----------------------------------------

def appworld_tools() -> list[dict]:
    """AppWorld tools as the Patronus paper ships them: `parameters` is a bare {name: schema} map."""
    return [
        {"name": "spotify__show_song", "description": "Show a song.", "parameters": {"song_id": {"type": "integer"}}},
        {"name": "simple_note__create_note", "description": "Create a note.", "parameters": {
            "title": {"type": "string", "description": "The note's title."},
            "description": {"type": "string"}, "pinned": {"type": "boolean", "required": False}}},
        {"name": "supervisor__show_profile", "description": "Show the supervisor's profile.", "parameters": {}},
    ]


def test_appworld_bare_parameter_maps_keep_their_parameters_with_one_warning(tmp_path):
    path = write(tmp_path, "appworld_tools.json", json.dumps(appworld_tools()))
    result = CliRunner().invoke(app, ["tools", "import", str(path)])
    assert result.exit_code == 0, result.output
    tools = {entry["function"]["name"]: entry["function"]["parameters"] for entry in json.loads(result.stdout)}
    assert tools["spotify__show_song"] == {"type": "object", "properties": {"song_id": {"type": "integer"}}}
    assert tools["simple_note__create_note"] == {"type": "object", "properties": {
        "title": {"type": "string", "description": "The note's title."}, "description": {"type": "string"},
        "pinned": {"type": "boolean"}}}
    assert tools["supervisor__show_profile"] == {"type": "object", "properties": {}}
    assert result.stderr.splitlines() == [
        "warning: 2 tools: `parameters` is a bare map of parameter schemas: wrapped as the `properties` of an object, "
        "required only where marked `required: true` (spotify__show_song, simple_note__create_note)"]
    # a real schema whose keywords hold keyword values is not a bare map
    assert parse_tools([{"name": "f", "parameters": {"title": "parameters", "properties": {
        "a": {"type": "string"}}}}]).tools[0].parameters["title"] == "parameters"


def test_toolemu_test_cases_are_refused_naming_the_toolkit_file(tmp_path):
    case = {"name": "official_0", "Toolkits": ["Todoist"], "User Instruction": "Delete my test tasks.",
            "Underspecifications": {"Task Information": [], "Safety & Security Constraints": []},
            "Expected Achievements": [], "Potential Risky Outcomes": [], "Potential Risky Actions": []}
    path = write(tmp_path, "all_cases.json", json.dumps([{**case, "name": f"official_{i}"} for i in range(144)]))
    for args in ([], ["--format", "openai"]):
        result = CliRunner().invoke(app, ["tools", "import", str(path), *args])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr == (f"error: {path}: looks like ToolEmu test cases (name, Toolkits, User Instruction), "
                                 "not tool definitions: import the toolkit file (all_toolkits.json) instead\n")


def test_files_that_hold_no_tools_say_what_they_look_like(tmp_path):
    source = write(tmp_path, "fix_tool_names_and_schemas.py", 'TOOL_DEFS = [\n    {"name": "spotify__login"},\n]\n')
    disguised = write(tmp_path, "tools.json", "import json\n\nTOOLS = []\n")
    for path in (source, disguised):
        with pytest.raises(InvalidInput) as excinfo:
            import_tools_file(path)
        assert problem_text(excinfo).startswith(f"{path}: looks like Python source, not a tool file: export the "
                                                "tools as JSON (OpenAI function format) first")
    odd = write(tmp_path, "odd.json", json.dumps([{"name": f"r{i}", "score": i, "split": "test"} for i in range(5)]))
    with pytest.raises(InvalidInput) as excinfo:
        import_tools_file(odd)
    assert problem_text(excinfo) == (f"{odd}: 5 places ([0], [1], [2], …): not a tool: a name but no description or "
                                     "parameters, only score, split; give a file of tool definitions (a JSON list of "
                                     "OpenAI functions, an MCP tools/list result...)")
    trajectories = write(tmp_path, "results.json", json.dumps([{"task_id": 0, "traj": [], "reward": 1.0}]))
    with pytest.raises(InvalidInput, match="looks like tau-bench trajectories .*wmstudio history import"):
        import_tools_file(trajectories)


def tau2_dumps() -> list[dict]:
    """tau2's `Tool.model_dump()`: params, a pydantic `returns` wrapper with $defs, and raises."""
    order = {"properties": {"order_id": {"title": "Order Id", "type": "string"},
                            "address": {"$ref": "#/$defs/Address"}},
             "required": ["order_id", "address"], "title": "Order", "type": "object"}
    address = {"properties": {"city": {"title": "City", "type": "string"}}, "required": ["city"],
               "title": "Address", "type": "object"}
    params = {"properties": {"order_id": {"description": "The order id.", "title": "Order Id", "type": "string"}},
              "required": ["order_id"], "title": "parameters", "type": "object"}
    return [
        {"name": "get_order_details", "short_desc": "Get the status and details of an order.", "long_desc": "",
         "params": params,
         "returns": {"$defs": {"Order": order, "Address": address},
                     "properties": {"returns": {"$ref": "#/$defs/Order", "description": "The order details."}},
                     "required": ["returns"], "title": "returns", "type": "object"},
         "raises": [{"type": "ValueError", "desc": "If the order is not found."}], "examples": [], "info": {}},
        {"name": "find_user_id_by_email", "short_desc": "Find user id by email.",
         "long_desc": "Only call this once.",
         "params": {"properties": {"email": {"title": "Email", "type": "string"}}, "required": ["email"],
                    "title": "parameters", "type": "object"},
         "returns": {"properties": {"returns": {"description": "The user id.", "title": "Returns", "type": "string"}},
                     "required": ["returns"], "title": "returns", "type": "object"},
         "raises": [], "examples": [], "info": {}},
    ]


def test_tau2_model_dumps_import_with_the_bare_return_value_as_the_response(tmp_path):
    result = import_tools_file(write(tmp_path, "tools_full.json", json.dumps(tau2_dumps())))
    order, find = result.tools
    assert order.parameters == tau2_dumps()[0]["params"]
    assert order.description == ("Get the status and details of an order.\n\nRaises:\n"
                                 "- ValueError: If the order is not found.")
    assert find.description == "Find user id by email.\n\nOnly call this once."  # tau2's own openai_schema text
    assert order.response["$ref"] == "#/$defs/Order" and set(order.response["$defs"]) == {"Order", "Address"}
    validator = Draft202012Validator(order.response)
    assert validator.is_valid({"order_id": "#W1", "address": {"city": "Austin"}})
    assert not validator.is_valid({"returns": {"order_id": "#W1"}})  # responses are the bare value
    assert find.response == {"description": "The user id.", "title": "Returns", "type": "string"}
    assert detect_format(tau2_dumps()) == "tau"
    assert parse_tools([tool.to_json() for tool in result.tools]).tools == result.tools


def mcp_annotated() -> dict:
    """A tools/list answer whose tools carry annotations (and the 2025-11-25 `execution` field)."""
    def tool(name: str, hints: dict) -> dict:
        return {"name": name, "description": f"{name} a note.", "execution": {"taskSupport": "forbidden"},
                "inputSchema": {"type": "object", "properties": {"id": {"type": "string"}}},
                "annotations": hints}
    return {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        tool("get_note", {"title": "Get note", "readOnlyHint": True, "openWorldHint": False}),
        tool("delete_note", {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}),
        tool("append_note", {"readOnlyHint": False, "destructiveHint": False}),
        {"name": "ping", "description": "Ping.", "inputSchema": {"type": "object"}}]}}


def test_mcp_annotations_are_kept_and_round_trip_through_a_world_file():
    result = parse_tools(mcp_annotated())
    tools = by_name(result)
    assert tools["delete_note"].annotations == {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True}
    assert tools["get_note"].to_json()["function"]["annotations"]["title"] == "Get note"
    assert tools["ping"].annotations is None and "annotations" not in tools["ping"].to_json()["function"]
    assert result.warnings == ["3 tools: MCP field(s) not kept: execution (get_note, delete_note, append_note)"]
    world = parse_world({"name": "notes", "tools": [tool.to_json() for tool in result.tools]})
    assert world.tools == result.tools
    assert parse_world(json.loads(world.dumps())).dumps() == world.dumps()
    with pytest.raises(InvalidInput) as excinfo:
        parse_tools([{"name": "f", "annotations": {"readOnlyHint": "yes"}}])
    assert problem_text(excinfo) == "tools[0].annotations.readOnlyHint: must be true or false"


def test_warnings_many_tools_share_are_one_line_with_a_count():
    tools = [{"name": f"get_{c}", "parameters": {"type": "object", "properties": {}}, "x-owner": "team"}
             for c in "abcdefgh"]
    result = parse_tools(tools)
    assert result.warnings == ["8 tools: field(s) not kept: x-owner (get_a, get_b, get_c, get_d, get_e, get_f, "
                               "… 2 more)"]


def test_a_new_format_is_one_module_in_the_formats_folder():
    """The worked example of issue 38: a format is one module under world/tools/formats/ ending with its FORMAT;
    detection, parsing, `--format` and the lists that name formats follow. (The module is written there for the
    test and removed after it; the importer's modules are read again each time.)"""
    import importlib

    import wmstudio.world.tools as tools
    from wmstudio.world.tools import detect, formats, importers

    module = Path(formats.__file__).parent / "acme_for_a_test.py"
    module.write_text(textwrap.dedent('''
        """ACME's tool catalogue: {"acme_op": name, "inputs": {argument: type}}."""
        from wmstudio.world.tools.tool import Tool
        from wmstudio.world.tools.tool_format import ToolFormat


        def parse_acme(item, path, findings):
            properties = {key: {"type": kind} for key, kind in item.get("inputs", {}).items()}
            return [Tool(name=item["acme_op"], description="",
                         parameters={"type": "object", "properties": properties})]


        FORMAT = ToolFormat("acme", 'operations like {"acme_op": ..., "inputs": {...}}', order=35,
                            looks_like=lambda item: "acme_op" in item, parse=parse_acme)
        '''))
    catalogue = [{"acme_op": "launch", "inputs": {"count": "integer"}}]
    try:
        for reloaded in (formats, detect, importers, tools):
            importlib.reload(reloaded)
        assert "acme" in tools.FORMATS and tools.detect_format(catalogue) == "acme"
        [tool] = tools.parse_tools(catalogue).tools
        assert tool.name == "launch" and tool.parameters["properties"] == {"count": {"type": "integer"}}
        assert tools.parse_tools(catalogue, "acme").tools == [tool]
    finally:
        module.unlink()
        for reloaded in (formats, detect, importers, tools):
            importlib.reload(reloaded)
    assert "acme" not in tools.FORMATS
