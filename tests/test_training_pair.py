"""The MDLM / AR pair ([wm-pair]): one command trains both from scratch, side by side, on equal terms (the same
corpus, tokenizer, shape and steps, one thread each), and says what each got; a sitting cut short goes on with
`--resume`."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from wmstudio.problems import InvalidInput
from wmstudio.train.world_model.pair import ARCHS, PairConfig, pair_commands, train_pair
from wmstudio.world.corpus.rows import write_corpus

pytestmark = pytest.mark.slow


def test_the_pair_trains_both_on_equal_terms_and_says_what_each_got(tmp_path):
    corpus = tmp_path / "corpus"
    write_corpus(corpus, rows=40, seed=9, oracle_share=0.0)
    config = PairConfig(corpus=corpus, out=tmp_path / "pair", steps=2, minutes=5, batch_tokens=1024)
    commands = pair_commands(config)
    differ = [set(a) ^ set(b) for a, b in [(commands["mdlm"], commands["ar"])]][0]
    assert differ == {"mdlm", "ar", str(config.out / ARCHS["mdlm"]), str(config.out / ARCHS["ar"])}
    first = train_pair(replace(config, sitting_minutes=0.001), log=lambda _: None)  # a sitting cut short
    assert not first["finished"] and all(m["steps"] < 2 and not m["finished"] for m in first["models"].values())
    summary = train_pair(replace(config, resume=True), log=lambda _: None)  # the next sitting goes on
    assert summary["finished"] and summary["same_tokenizer"] and summary["same_steps"]
    assert summary["parameter_gap"] <= 0.05
    for arch, folder in ARCHS.items():
        got = summary["models"][arch]
        assert got["exit"] == 0 and got["steps"] == 2 and got["cpu_seconds"] > 0 and got["sittings"] == 2
        assert (config.out / folder / "model.safetensors").is_file()
        assert json.loads((config.out / folder / "training.json").read_text())["arch"] == arch
    assert json.loads((config.out / "pair.json").read_text()) == summary


def test_a_pair_that_cannot_train_says_which_and_why(tmp_path):
    with pytest.raises(InvalidInput) as err:
        train_pair(PairConfig(corpus=tmp_path / "nowhere", out=tmp_path / "pair", steps=2), log=lambda _: None)
    assert {p.path for p in err.value.problems} == {"mdlm", "ar"}
    assert "training failed" in str(err.value)
