"""The CLI starts without the heavy libraries: `--help` and refused input never import torch, transformers,
Gradio or TRL (which took `wmstudio --help` 5 s warm); the commands that need them import them themselves.

Each case runs the real console entry in a fresh interpreter and reads back which of those modules it loaded.
Timings are benchmarks' business (README: `wmstudio --help` median of 5); here it is what gets imported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wmstudio.locations import ASSETS_DIR

HEAVY = ("torch", "transformers", "gradio", "trl", "peft", "datasets", "pandas")
EXAMPLES = ASSETS_DIR / "examples"
WORLD, CALL, RESPONSE = (str(EXAMPLES / name) for name in ("refund-world.json", "refund-call.json",
                                                            "coherent-response.json"))
UNQUOTED = "status=error"  # what a shell leaves of status="error" typed without single quotes
PROBE = """
import atexit, json, sys
heavy = {heavy!r}
atexit.register(lambda: print("LOADED " + json.dumps(sorted(m for m in heavy if m in sys.modules)), file=sys.stderr))
sys.argv = ["wmstudio", *{argv!r}]
from wmstudio.cli import main
main()
"""


def run_cli(*argv: str) -> tuple[int, str, str, list[str]]:
    """(exit code, stdout, stderr without the probe's line, heavy modules loaded) of `wmstudio ARGV`."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY, argv=list(argv))], capture_output=True,
                          text=True, timeout=120)
    lines = done.stderr.splitlines()
    loaded = json.loads(next(line for line in lines if line.startswith("LOADED "))[len("LOADED "):])
    return done.returncode, done.stdout, "\n".join(line for line in lines if not line.startswith("LOADED ")), loaded


@pytest.mark.parametrize("argv", [["--help"], ["tools", "--help"],
                                  ["check", "--help"], ["train-wm", "--help"], ["serve", "--help"]])
def test_help_imports_none_of_the_heavy_libraries(argv):
    code, out, err, loaded = run_cli(*argv)
    assert code == 0, err
    assert "Usage: wmstudio" in out
    assert loaded == []


@pytest.mark.parametrize("argv", [
    ["check", WORLD, "--call", CALL, "--response", RESPONSE, "--anchor", UNQUOTED],
    ["generate", WORLD, "--call", CALL, "--anchor", UNQUOTED],
])
def test_an_unquoted_anchor_is_refused_before_any_heavy_library_loads(argv):
    code, out, err, loaded = run_cli(*argv)
    assert code == 2 and out == ""
    assert err == "error: anchor status=error: the value `error` is not JSON: quote text as status=\"error\" (in a " \
                  "shell: 'status=\"error\"')"
    assert loaded == []


@pytest.mark.parametrize(("argv", "message"), [
    (["serve-wm", "--model", "/no/such/model"], "model /no/such/model: no such folder"),
    (["eval-wm", "--corpus", "/no/such/corpus"], "/no/such/corpus: not a folder"),
    (["evaluate", "--policy", "bogus"], "'bogus' is not a scripted policy"),
    (["evaluate", "--policy", "expert", "--model", "/no/such/model"], "model /no/such/model: no such folder"),
    (["space", "build", "{out}", "--hardware", "quantum"], "'quantum' is not a Space hardware"),
])
def test_a_wrong_model_corpus_policy_or_hardware_is_refused_before_the_model_libraries_load(argv, message, tmp_path):
    code, out, err, loaded = run_cli(*[arg.format(out=tmp_path / "space") for arg in argv],
                                     *(["--db", str(tmp_path / "studio.db")] if argv[0] == "evaluate" else []))
    assert code == 2 and message in err and "Traceback" not in err
    assert not {"torch", "transformers", "gradio", "trl"} & set(loaded), loaded


def test_generate_help_shows_the_samplers_own_help_and_defaults():
    code, out, err, loaded = run_cli("generate", "--help")
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())
    assert "CTRL penalty on tokens already in the response" in text  # SamplerSettings.help("repetition_penalty")
    assert "[default: 0.9]" in text  # --threshold: the sampler's default, read from SamplerSettings
    assert "(the sampler's own help)" not in text
    assert loaded == []  # the options are SamplerSettings' fields, which live apart from the torch sampler


def test_train_wm_help_says_what_the_command_does():
    code, out, err, _ = run_cli("train-wm", "--help")
    assert code == 0, err
    text = " ".join(out.replace("│", " ").split())
    assert "Train a world model on a corpus of chat rows" in text
    assert "Everything a training run depends on" not in text
