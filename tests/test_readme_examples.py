"""What the README promises, run through the real `wmstudio` CLI: the refund example and the malformed inputs table.

If a message here changes, the README's table must change with it."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from wmstudio.cli import app
from wmstudio.locations import ASSETS_DIR

EXAMPLES = ASSETS_DIR / "examples"
RETAIL = str(ASSETS_DIR / "worlds" / "retail.json")
runner = CliRunner()


def wmstudio(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_refund_example_catches_the_incoherent_response_and_passes_the_coherent_one():
    world, call = EXAMPLES / "refund-world.json", EXAMPLES / "refund-call.json"
    bad = wmstudio("check", world, "--call", call, "--response", EXAMPLES / "incoherent-response.json",
                   "--anchor", 'status="error"')
    assert bad.exit_code == 1
    report = json.loads(bad.stdout)
    assert report["rule_violations"][0]["rule"] == "An error status means no refund was processed."
    assert report["json_valid"] and not report["schema_errors"] and not report["anchor_violations"]

    good = wmstudio("check", world, "--call", call, "--response", EXAMPLES / "coherent-response.json",
                    "--anchor", 'status="error"')
    assert good.exit_code == 0 and json.loads(good.stdout)["ok"] is True


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


MALFORMED = [
    # (name, files to write, argv using {tmp}, text the message must contain)
    ("bad JSON", {"w.json": b'{"name": "x", "tools": ['}, ["validate", "{tmp}/w.json"], "w.json:1:25: invalid JSON"),
    ("wrong types and missing fields",
     {"w.json": b'{"task": 5, "tools": {}, "colour": "red"}'}, ["validate", "{tmp}/w.json"],
     "name: missing or empty"),
    ("broken CEL", {"w.json": b'{"name": "x", "rules": [{"text": "r", "check": "response.total >"}]}'},
     ["validate", "{tmp}/w.json"], "rules[0].check: CEL syntax error at line 1, column 16"),
    ("huge file", {"w.json": b'{"name":"x","task":"' + b"a" * 5_000_001 + b'"}'}, ["validate", "{tmp}/w.json"],
     "over the 5,000,000-byte limit"),
    ("non-UTF-8", {"w.json": b'{"name": "caf\xe9"}'}, ["validate", "{tmp}/w.json"], "not UTF-8 text"),
    ("empty tool file", {"t.json": b""}, ["tools", "import", "{tmp}/t.json"], "file is empty"),
    ("unknown type", {"t.json": b'[{"name": "w", "parameters": {"type": "object", "properties": '
                                 b'{"city": {"type": "strng"}}}}]'},
     ["tools", "import", "{tmp}/t.json"], "unknown type 'strng': did you mean 'string'?"),
    ("unknown format", {}, ["tools", "import", RETAIL, "--format", "xml"], "unknown format 'xml': use one of auto"),
    ("anchor value not JSON", {"c.json": b'{"name": "refund_order", "arguments": {}}', "r.json": b"{}"},
     ["check", RETAIL, "--call", "{tmp}/c.json", "--response", "{tmp}/r.json", "--anchor", "status=error"],
     "quote text as status=\"error\""),
    ("call to an unknown tool", {"c.json": b'{"name": "launch_rocket", "arguments": {}}', "r.json": b"{}"},
     ["check", RETAIL, "--call", "{tmp}/c.json", "--response", "{tmp}/r.json"],
     "no tool 'launch_rocket' in world 'retail'"),
    ("call without a name", {"c.json": b'{"arguments": {}}', "r.json": b"{}"},
     ["check", RETAIL, "--call", "{tmp}/c.json", "--response", "{tmp}/r.json"], "call.name: missing"),
    ("missing file", {"c.json": b'{"name": "get_order", "arguments": {}}'},
     ["check", RETAIL, "--call", "{tmp}/c.json", "--response", "{tmp}/nope.json"], "nope.json: no such file"),
    ("unknown prompt format", {"c.json": b'{"name": "get_order", "arguments": {}}'},
     ["prompt", RETAIL, "--call", "{tmp}/c.json", "--format", "yaml"], "--format 'yaml' is not known"),
]


@pytest.mark.parametrize("name,files,argv,expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_gets_a_clear_message_and_exit_2(tmp_path, name, files, argv, expected):
    for filename, data in files.items():
        _write(tmp_path / filename, data)
    result = wmstudio(*[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert result.exit_code == 2, result.output
    assert expected in result.stderr
    assert "Traceback" not in result.output
