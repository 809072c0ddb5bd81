"""Chat models as agent policies (train/agent/chat_policy.py): a causal LM with a chat template reads the task and the
tools' answers as chat turns, its tool calls are parsed, and train-grpo trains it (all weights or LoRA adapters)
through the same rollouts as the word policy. The model is a tiny Qwen3 built here with Qwen3's own chat template
(TRL ships it), standing in for a hub checkpoint."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
import trl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from wmstudio.problems import InvalidInput
from wmstudio.train.agent.agent_config import GrpoSettings
from wmstudio.train.agent.agent_policy import load_policy
from wmstudio.train.agent.chat_policy import ChatPolicy, parse_chat_action, tool_specs, user_turn
from wmstudio.train.agent.environments import SIMULATOR, EpisodeWorld
from wmstudio.train.agent.grpo import play_group, train_grpo
from wmstudio.train.agent.scenarios import HELDOUT, TRAIN, Trajectory, demo_scenarios, split_of
from wmstudio.world.spec import Call

QWEN3_TEMPLATE = (Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja").read_text()
SCENARIOS = demo_scenarios(per_world=1, heldout_per_world=1)


@pytest.fixture(scope="module")
def chat_model_folder(tmp_path_factory) -> Path:
    """A 60k-parameter Qwen3 with a byte-level BPE tokenizer and Qwen3's chat template, saved as a hub model is."""
    texts = [QWEN3_TEMPLATE] + [json.dumps(tool_specs(s)) + user_turn(s) for s in SCENARIOS]
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, special_tokens=[
        "<|endoftext|>", "<|im_start|>", "<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    core.add_tokens(["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tokenizer.chat_template = QWEN3_TEMPLATE
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, max_position_embeddings=4096, tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id))
    folder = tmp_path_factory.mktemp("hub") / "tiny-qwen3-chat"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_tool_calls_are_read_in_the_template_format_and_anything_else_is_the_answer():
    tagged = '<tool_call>\n{"name": "cancel_order", "arguments": {"order_id": "ORD-1"}}\n</tool_call>'
    assert parse_chat_action(tagged) == Call("cancel_order", {"order_id": "ORD-1"})
    assert parse_chat_action("<think>\nfirst look\n</think>\n\n" + tagged) == Call("cancel_order", {"order_id": "ORD-1"})
    assert parse_chat_action('{"name": "ls", "arguments": "{\\"path\\": \\"/\\"}"}') == Call("ls", {"path": "/"})
    assert parse_chat_action("Could not refund it: the order was never delivered.").startswith("Could not")
    assert parse_chat_action('<tool_call>\n{"name": "ls", "arguments": {"path": </tool_call>') is None  # cut JSON
    assert parse_chat_action('<tool_call>{"arguments": {}}</tool_call>') is None  # no tool name
    assert parse_chat_action("  ") is None


def test_a_folder_without_a_chat_template_or_a_policy_marker_is_refused_by_name(tmp_path, chat_model_folder):
    with pytest.raises(InvalidInput, match="policy.json"):
        load_policy(tmp_path)
    plain = tmp_path / "plain"
    tokenizer = PreTrainedTokenizerFast.from_pretrained(chat_model_folder)
    tokenizer.chat_template = None
    tokenizer.save_pretrained(plain)
    Qwen3ForCausalLM.from_pretrained(chat_model_folder).save_pretrained(plain)
    with pytest.raises(InvalidInput, match="no chat template"):
        load_policy(plain)


def test_the_conversation_the_policy_reads_is_what_its_template_renders(chat_model_folder):
    policy = load_policy(chat_model_folder)
    assert isinstance(policy, ChatPolicy)
    scenario = next(s for s in SCENARIOS if s.world.name == "retail")
    episode, prompt_ids = policy.begin(scenario)
    opening = policy.tokenizer.decode(prompt_ids)
    assert scenario.task in opening and '"name": "refund_order"' in opening and opening.endswith("assistant\n")
    # the expert's call, as the policy would write it, then the simulator's answer as a tool turn
    call = scenario.target
    reply = f'<tool_call>\n{json.dumps({"name": call.name, "arguments": call.arguments})}\n</tool_call>'
    episode.ids += policy.tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
    episode.messages.append({"role": "assistant", "content": reply})
    response = EpisodeWorld(scenario, SIMULATOR).answer(call)
    shown = policy.observe(episode, response)
    assert policy.tokenizer.decode(shown).startswith("\n<|im_start|>user\n<tool_response>\n" + response)
    whole = policy.tokenizer.apply_chat_template(episode.messages, tools=tool_specs(scenario), tokenize=False,
                                                 add_generation_prompt=True)
    assert policy.tokenizer.decode(episode.ids) == whole  # every token trained on or shown is the template's


def test_rollouts_of_a_chat_policy_carry_the_log_probabilities_trl_will_score(chat_model_folder):
    policy = load_policy(chat_model_folder)
    rollouts = play_group(policy, split_of(SCENARIOS, TRAIN)[:3] * 2, SIMULATOR, None)  # batched, left-padded
    for rollout in rollouts:
        assert len(rollout.completion_ids) == len(rollout.logprobs) == len(rollout.env_mask) > 0
        assert rollout.transcript  # an untrained model writes junk: the episode ends malformed, and says so
        ids = torch.tensor([rollout.prompt_ids + rollout.completion_ids])
        with torch.no_grad():
            scored = policy.model(ids).logits[0, len(rollout.prompt_ids) - 1:-1].log_softmax(-1)
        again = scored.gather(-1, torch.tensor(rollout.completion_ids)[:, None])[:, 0]
        trained = torch.tensor(rollout.env_mask, dtype=torch.bool)
        assert torch.allclose(again[trained], torch.tensor(rollout.logprobs)[trained], atol=1e-4)


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_train_grpo_trains_a_chat_policy_and_saves_one_that_loads_back(chat_model_folder, tmp_path, lora_rank):
    settings = GrpoSettings(policy=str(chat_model_folder), env=SIMULATOR, max_steps=2, generations=2,
                            scenarios_per_step=2, save_every=2, lora_rank=lora_rank, learning_rate=1e-3,
                            min_reachable=0)  # an untrained model succeeds nowhere: the plumbing is under test
    result = train_grpo(settings, tmp_path / "run", None, log=lambda _: None, curriculum=SCENARIOS)
    assert result.steps == 2 and result.heldout_episodes == len(split_of(SCENARIOS, HELDOUT))
    saved = json.loads((Path(result.policy_folder) / "policy.json").read_text())
    assert saved["kind"] == "chat-policy" and saved["steps"] == 2
    trained = load_policy(result.policy_folder)
    assert isinstance(trained, ChatPolicy)
    assert not any("lora" in name for name, _ in trained.model.named_parameters())  # adapters merged in
    assert set(trained.model.state_dict()) == set(Qwen3ForCausalLM.from_pretrained(chat_model_folder).state_dict())
    assert trained.act(split_of(SCENARIOS, HELDOUT)[0], Trajectory()) is not None


def test_a_run_says_no_simulator_where_none_can_judge_and_refuses_a_batch_it_cannot_build(chat_model_folder, tmp_path):
    """Issue 39: held-out success read "0.0%" from 0 episodes, and a batch larger than the curriculum trained 0 steps
    yet ended "finished"."""
    train = split_of(SCENARIOS, TRAIN)[:2]
    unjudged = [dataclasses.replace(s, world=dataclasses.replace(s.world, simulator=None))
                for s in split_of(SCENARIOS, HELDOUT)[:2]]
    said: list[str] = []
    settings = GrpoSettings(policy=str(chat_model_folder), env=SIMULATOR, max_steps=1, generations=2,
                            scenarios_per_step=2, save_every=1, min_reachable=0)  # untrained: succeeds nowhere
    result = train_grpo(settings, tmp_path / "run", None, log=said.append, curriculum=train + unjudged)
    assert result.steps == 1 and result.heldout_before is None and result.heldout_after is None
    assert result.heldout_episodes == 0 and any("unmeasured (no simulator" in line for line in said)
    with pytest.raises(InvalidInput, match=r"scenarios_per_step: .* has 2 training scenario\(s\) and a step plays 3"):
        train_grpo(dataclasses.replace(settings, scenarios_per_step=3), tmp_path / "other", None, log=said.append,
                   curriculum=train + unjudged)
    assert not (tmp_path / "other" / "policy").exists()
