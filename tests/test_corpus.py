"""The simulated-world corpus: every row re-checks against its world, files repeat byte for byte per seed, and the
mix (splits, grounding, directives, mistakes, history lengths) is what a world model should learn from."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from wmstudio.problems import InvalidInput
from wmstudio.world.checks.report import check_step
from wmstudio.world.corpus.rows import SPLITS, write_corpus
from wmstudio.world.history import compact_json, parse_history
from wmstudio.world.rules.cel import rule_codes
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call
from wmstudio.world.steering.directives import parse_directive

ROWS, SEED = 2000, 5


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, dict, dict[str, list[dict]]]:
    out = tmp_path_factory.mktemp("corpus")
    calls: list[tuple[int, int]] = []
    stats = write_corpus(out, rows=ROWS, seed=SEED, progress=lambda done, total: calls.append((done, total)))
    stats["progress"] = calls
    rows = {split: [json.loads(line) for line in (out / f"{split}.jsonl").read_text("utf-8").splitlines()]
            for split in SPLITS}
    return out, stats, rows


def all_rows(rows: dict[str, list[dict]]) -> list[dict]:
    return [row for split in SPLITS for row in rows[split]]


@pytest.mark.slow
def test_every_row_passes_its_worlds_checks_and_replays_to_the_same_response(corpus):
    _, _, rows = corpus
    for row in all_rows(rows):
        meta = row["meta"]
        sim = get_simulator(meta["world"])
        world = sim.world(meta["initial_state"], meta["directives"])
        answer = row["messages"][-1]["content"]
        report = check_step(world, Call.from_json(meta["call"]), answer, history=parse_history(meta["history"]))
        assert report.ok, (meta["world"], meta["call"], answer, report.to_json())
        state = meta["initial_state"]  # replay: the meta alone reproduces every response
        for earlier in meta["history"]:
            state, response = sim.step(state, Call.from_json(earlier["call"]))
            assert response == earlier["response"]
        assert compact_json(sim.step(state, Call.from_json(meta["call"]), meta["directives"])[1]) == answer


def test_every_error_row_has_its_codes_cause_checked_or_was_steered(corpus):
    """The rows' error codes are ones their world's rules state a cause for (so the check above tested the cause),
    or the row's directives forced them (an injected outage, a rate limit, a refused login)."""
    _, _, rows = corpus
    stated = {name: {code for rule in sim.rules() for code in rule_codes(rule)} for name, sim in SIMULATORS.items()}
    checked = Counter()
    for row in all_rows(rows):
        meta, answer = row["meta"], json.loads(row["messages"][-1]["content"])
        code = answer.get("error", "")
        if not code:
            continue
        if code in stated[meta["world"]] and f"inject_error: {code}" not in meta["directives"]:
            checked[code] += 1
        else:
            assert {"inject_error", "rate_limit", "auth_failure"} & {d.split(":")[0] for d in meta["directives"]}, \
                (meta["world"], code, meta["directives"])
    assert len(checked) >= 25 and sum(checked.values()) >= 300, checked


def test_rows_are_chat_rows_in_the_public_format(corpus):
    _, _, rows = corpus
    for row in all_rows(rows)[:300]:
        assert set(row) == {"dataset", "messages", "meta"}
        assert row["dataset"] == f"wmstudio-sim/{row['meta']['world']}"
        assert [m["role"] for m in row["messages"]] == ["system", "user", "assistant"]
        system, user = row["messages"][0]["content"], row["messages"][1]["content"]
        assert system.startswith("## ENVIRONMENT STATE") and "PREDICTION TARGET:" in system
        assert user.startswith("State:") and "\n\nAction: " in user
        assert {"world", "initial_state", "call", "history", "directives", "grounding"} <= set(row["meta"])


def test_same_seed_gives_byte_identical_files_and_another_seed_does_not(corpus, tmp_path):
    out, _, _ = corpus
    write_corpus(tmp_path / "again", rows=ROWS, seed=SEED)
    for split in SPLITS:
        assert (tmp_path / "again" / f"{split}.jsonl").read_bytes() == (out / f"{split}.jsonl").read_bytes()
    write_corpus(tmp_path / "other", rows=30, seed=SEED + 1)
    write_corpus(tmp_path / "same", rows=30, seed=SEED)
    assert (tmp_path / "other" / "train.jsonl").read_bytes() != (tmp_path / "same" / "train.jsonl").read_bytes()


def test_splits_are_80_10_10_disjoint_and_hold_every_world(corpus):
    _, stats, rows = corpus
    assert {split: len(rows[split]) for split in SPLITS} == {"train": 1600, "eval": 200, "test": 200}
    assert stats["splits"] == {"train": 1600, "eval": 200, "test": 200} and stats["rows"] == ROWS
    texts = {split: {json.dumps(row["messages"]) for row in rows[split]} for split in SPLITS}
    assert sum(len(t) for t in texts.values()) == ROWS  # no row twice, so no row in two splits
    for split in SPLITS:
        assert {row["meta"]["world"] for row in rows[split]} == set(SIMULATORS)
    assert stats["worlds"] == {name: ROWS // len(SIMULATORS) for name in sorted(SIMULATORS)}


def test_mix_of_grounding_directives_mistakes_and_history(corpus):
    _, stats, rows = corpus
    everything = all_rows(rows)
    oracle = [row for row in everything if row["meta"]["grounding"] == "oracle"]
    steered = [row for row in everything if row["meta"]["directives"]]
    assert {row["meta"]["grounding"] for row in everything} == {"none", "oracle"}
    assert 0.35 <= len(oracle) / ROWS <= 0.45 and stats["oracle_grounding"] == len(oracle)  # at least half none
    assert 0.2 <= len(steered) / ROWS <= 0.3 and stats["with_directives"] == len(steered)
    assert 0.15 <= stats["invalid_calls"] / ROWS <= 0.25
    for row in everything:  # the rules are one of the five parts: every prompt has them; only oracle rows name one
        system = row["messages"][0]["content"]
        assert "## DOMAIN RULES" in system
        assert row in oracle or "oracle" not in system.lower()
    labelled = [row for row in oracle if "State (oracle:" in row["messages"][0]["content"]
                or "Oracle (the simulator's retrieval" in row["messages"][0]["content"]]
    assert len(labelled) >= len([row for row in oracle if row["meta"]["history"]])  # a replayed state is labelled
    kinds = Counter()
    for row in steered:
        system = row["messages"][0]["content"]
        for text in row["meta"]["directives"]:
            assert f"- {text}" in system.split("## STEERING DIRECTIVES", 1)[1]
            kinds[parse_directive(text).kind] += 1
    assert set(kinds) == {"inject_error", "empty_result", "page_size", "rate_limit", "auth_failure",
                          "partial_success", "verbose"}
    lengths = Counter(len(row["meta"]["history"]) for row in everything)
    assert set(range(7)) <= set(lengths) <= set(range(8))  # 0-6 steps, and the page a continuation's token came from
    statuses = Counter(json.loads(row["messages"][-1]["content"])["status"] for row in everything)
    assert statuses["ok"] > statuses["error"] > 0 and statuses["partial"] > 0


def test_a_corpus_of_grounding_none_only_holds_the_same_rows_without_the_oracle(corpus, tmp_path):
    """`--oracle-share 0`: the rows a world model is trained on as it is used (the pair's corpus, [wm-pair])."""
    _, _, rows = corpus
    stats = write_corpus(tmp_path, rows=200, seed=SEED, oracle_share=0.0)
    plain = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text("utf-8").splitlines()]
    assert stats["oracle_grounding"] == 0 and stats["oracle_share"] == 0.0
    assert {row["meta"]["grounding"] for row in plain} == {"none"}
    assert all("oracle" not in row["messages"][0]["content"].lower() for row in plain)
    mixed = {json.dumps(row["meta"]["call"]) + json.dumps(row["meta"]["initial_state"]) for row in rows["train"]}
    same = [row for row in plain if json.dumps(row["meta"]["call"]) + json.dumps(row["meta"]["initial_state"]) in mixed]
    assert len(same) >= len(plain) // 2  # the same draws (a smaller corpus splits them otherwise)


def test_progress_reports_up_to_the_total(corpus):
    _, stats, _ = corpus
    assert stats["progress"][-1] == (ROWS, ROWS)
    assert [done for done, _ in stats["progress"]] == sorted(done for done, _ in stats["progress"])


def test_bad_requests_name_the_field(tmp_path):
    with pytest.raises(InvalidInput, match="rows"):
        write_corpus(tmp_path / "c", rows=0, seed=0)
    with pytest.raises(InvalidInput, match="seed"):
        write_corpus(tmp_path / "c", rows=10, seed="zero")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(InvalidInput, match="is a file"):
        write_corpus(a_file, rows=10, seed=0)
    assert not (tmp_path / "c").exists()
