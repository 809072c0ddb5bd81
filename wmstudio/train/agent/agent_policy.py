"""The agent policy: a small causal LM (Qwen3 architecture, built from a config) over the episode words of
`agent_text`, with a word-level tokenizer whose slot tokens carry the copy mechanism.

It is a plain transformers checkpoint (`save_pretrained` / `from_pretrained`), so TRL's GRPOTrainer scores it with
its own head; `act` plays it as a `Policy` (greedy), `sample_actions` writes a batch of next actions with their
log-probabilities (what GRPO rollouts need)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import WhitespaceSplit
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

from wmstudio.model.network.sources import resolve_model_path
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.agent_config import POLICY_MARKER
from wmstudio.train.agent.agent_text import (
    BOS,
    EOA,
    PAD,
    SPECIAL,
    UNK,
    SlotTable,
    episode_words,
    parse_action,
    prompt_words,
    result_words,
)
from wmstudio.train.agent.chat_policy import CHAT_KIND, ChatPolicy, load_chat_policy
from wmstudio.train.agent.environments import Action, Turn
from wmstudio.train.agent.policy_sampling import sample_replies
from wmstudio.train.agent.scenarios import MALFORMED, Scenario, Trajectory

MAX_ACTION_WORDS = 24  # the longest action a policy may write (the demo worlds' longest is 12)
MAX_CONTEXT = 1024


def word_tokenizer(words: list[str]) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over the special tokens, the slots and `words` (unknown words read as UNK)."""
    vocab = {token: index for index, token in enumerate(dict.fromkeys([*SPECIAL, *words]))}
    core = Tokenizer(WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOA, pad_token=PAD,
                                   unk_token=UNK, padding_side="left")


def new_policy_model(tokenizer: PreTrainedTokenizerFast, layers: int = 3, hidden: int = 96, heads: int = 4,
                     ffn: int = 256, seed: int = 0) -> Qwen3ForCausalLM:
    """A fresh Qwen3 causal LM sized for the CPU (about 0.4M parameters at the defaults)."""
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=ffn,
                         num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=max(1, heads // 2),
                         head_dim=hidden // heads, max_position_embeddings=MAX_CONTEXT, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    return Qwen3ForCausalLM(config)


@dataclass
class WordEpisode:
    """One episode as the policy reads it: the words so far and the values its slots stand for."""

    scenario: Scenario
    slots: SlotTable
    words: list[str]


@dataclass
class AgentPolicy:
    """A trained policy: its model and tokenizer, and where it came from (`name`, for reports)."""

    model: Qwen3ForCausalLM
    tokenizer: PreTrainedTokenizerFast
    name: str = "policy"

    def ids(self, words: list[str]) -> list[int]:
        """Token ids of episode words (the tokenizer's own lookup, one id per word)."""
        return self.tokenizer.convert_tokens_to_ids(words)

    def with_model(self, model: Qwen3ForCausalLM) -> AgentPolicy:
        """The same policy reading through `model` (the one a trainer is updating)."""
        return AgentPolicy(model, self.tokenizer, self.name)

    def begin(self, scenario: Scenario) -> tuple[WordEpisode, list[int]]:
        """The episode's opening words and their ids."""
        slots = SlotTable()
        words = prompt_words(scenario, slots)
        return WordEpisode(scenario, slots, words), self.ids(words)

    def sample_turns(self, episodes: list[WordEpisode], sample: bool = True, temperature: float = 1.0) -> list[Turn]:
        """Each episode's next action (sampled or greedy), parsed; the words join the episode."""
        written, logprobs = self.sample_actions([e.words for e in episodes], sample=sample, temperature=temperature)
        turns = []
        for episode, words, lp in zip(episodes, written, logprobs):
            episode.words += words
            turns.append(Turn(self.ids(words), lp, parse_action(words, episode.slots, episode.scenario.task),
                              " ".join(words)))
        return turns

    def observe(self, episode: WordEpisode, response: str) -> list[int]:
        """A tool's answer as result words joining the episode; their ids."""
        shown = result_words(response, episode.slots)
        episode.words += shown
        return self.ids(shown)

    def act(self, scenario: Scenario, trajectory: Trajectory) -> Action:
        """The policy's next action, greedy. A malformed one ends the episode with an answer that is neither done
        nor could-not (reporting a refused task as not done must be the policy's own words, never a fallback)."""
        words, slots = episode_words(scenario, trajectory)
        [written], _ = self.sample_actions([words], sample=False)
        action = parse_action(written, slots, scenario.task)
        return action if action is not None else f"{MALFORMED}: {' '.join(written)}"

    def sample_actions(self, contexts: list[list[str]], sample: bool = True, temperature: float = 1.0
                       ) -> tuple[list[list[str]], list[list[float]]]:
        """The next action of each context (its words up to and with EOA) and each word's log-probability under the
        policy, sampled or greedy; contexts are left-padded into one batch."""
        rows = [self.ids(words)[-(MAX_CONTEXT - MAX_ACTION_WORDS):] for words in contexts]
        replies, logprobs = sample_replies(self.model, rows, self.tokenizer.pad_token_id,
                                           [self.tokenizer.eos_token_id], MAX_ACTION_WORDS, sample, temperature)
        return [self.tokenizer.convert_ids_to_tokens(reply) for reply in replies], logprobs

    def save(self, folder: Path, info: dict[str, Any]) -> None:
        """Weights, tokenizer and `policy.json` (what trained it) in `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / POLICY_MARKER).write_text(json.dumps(info, indent=2) + "\n")


def load_policy(path: str | Path) -> AgentPolicy | ChatPolicy:
    """A saved agent policy, or a chat LM (a folder or a hub id) played through its chat template (a relative path
    is also tried from the repository root, as the shipped policy is named); InvalidInput naming the path when it
    is neither."""
    source = resolve_model_path(path)
    folder = Path(source)
    marker = folder / POLICY_MARKER
    if marker.is_file():
        if json.loads(marker.read_text()).get("kind") == CHAT_KIND:
            return load_chat_policy(source)
        model = Qwen3ForCausalLM.from_pretrained(folder)
        model.eval()
        tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
        return AgentPolicy(model, tokenizer, folder.name)
    if (folder.is_dir() and not (folder / "config.json").is_file()) or (not folder.is_dir() and "/" not in source):
        raise InvalidInput(Problem("policy", f"{str(path)!r} is not an agent policy folder (no {POLICY_MARKER}) nor "
                                             "a chat model: train one with `wmstudio train-agent`, give a hub id "
                                             "(e.g. Qwen/Qwen3-0.6B), or name a scripted policy"))
    return load_chat_policy(source)
