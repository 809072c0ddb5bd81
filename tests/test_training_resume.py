"""A training run longer than one sitting: it stops with a checkpoint and `--resume` goes on exactly where it
stopped, to the same weights as a run that never stopped; mismatched or careless restarts are refused by name."""

from __future__ import annotations

import json

import pytest
from safetensors.torch import load_file

from wmstudio.problems import InvalidInput
from wmstudio.train.world_model.checkpoint import checkpoint_folder
from wmstudio.train.world_model.training import TrainConfig, train_world_model
from wmstudio.world.corpus.rows import write_corpus

pytestmark = pytest.mark.slow

TINY = {"vocab_size": 600, "layers": 2, "hidden": 64, "heads": 2, "ffn": 128, "batch_tokens": 4000,
        "eval_rows": 4, "threads": 2, "learning_rate": 4e-3, "warmup_steps": 2, "minutes": 0, "steps": 6,
        "outcome_head": False}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("corpus")
    write_corpus(folder, rows=30, seed=5)
    return folder


def _weights(folder):
    return {**load_file(str(folder / "model.safetensors")), **load_file(str(folder / "copy_head.safetensors"))}


def test_two_sittings_end_where_one_run_ends(corpus, tmp_path):
    whole = train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "whole", **TINY))
    assert whole.finished and whole.steps == 6

    first = train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "split", sitting_steps=4, **TINY))
    assert not first.finished and first.steps == 4
    assert (checkpoint_folder(tmp_path / "split") / "model.safetensors").is_file()
    assert not (tmp_path / "split" / "model.safetensors").exists()  # no model until the schedule is done

    with pytest.raises(InvalidInput, match="out.*--resume"):  # a new run would overwrite the unfinished one
        train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "split", **TINY))
    with pytest.raises(InvalidInput, match="learning_rate"):  # the run's own settings, or the schedule changes
        train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "split", resume=True,
                                      **{**TINY, "learning_rate": 1e-3}))

    second = train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "split", resume=True, **TINY))
    assert second.finished and second.steps == 6
    assert not checkpoint_folder(tmp_path / "split").exists()
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "split")
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5, f"resumed weights differ from the uninterrupted run's by {worst}"

    record = json.loads((tmp_path / "split" / "training.json").read_text())
    assert [s["steps"] for s in record["sittings"]] == [4, 2]
    assert [p["step"] for p in record["loss_curve"]][-1] == 6
    assert all(s["cpu_seconds"] > 0 for s in record["sittings"])
    assert "trained in 2 sittings (`--resume`)" in (tmp_path / "split" / "README.md").read_text()


def test_resume_without_a_checkpoint_says_so(corpus, tmp_path):
    with pytest.raises(InvalidInput, match="resume.*no checkpoint"):
        train_world_model(TrainConfig(corpus=corpus, out=tmp_path / "none", resume=True, **TINY))
