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

from wmstudio.model.backends import resolve_model_path
from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent_text import BOS, EOA, PAD, SPECIAL, UNK, episode_words, parse_action
from wmstudio.train.environments import Action
from wmstudio.train.scenarios import Scenario, Trajectory

MAX_ACTION_WORDS = 24  # the longest action a policy may write (the demo worlds' longest is 12)
MAX_CONTEXT = 1024
MALFORMED = "(not an action)"  # how an episode ends when the policy writes words that are not an action
POLICY_MARKER = "policy.json"  # beside the weights: says the folder is an agent policy, and how it reads


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
class AgentPolicy:
    """A trained policy: its model and tokenizer, and where it came from (`name`, for reports)."""

    model: Qwen3ForCausalLM
    tokenizer: PreTrainedTokenizerFast
    name: str = "policy"

    def ids(self, words: list[str]) -> list[int]:
        """Token ids of episode words (the tokenizer's own lookup, one id per word)."""
        return self.tokenizer.convert_tokens_to_ids(words)

    def act(self, scenario: Scenario, trajectory: Trajectory) -> Action:
        """The policy's next action, greedy. A malformed one ends the episode with an answer that is neither done
        nor could-not (reporting a refused task as not done must be the policy's own words, never a fallback)."""
        words, slots = episode_words(scenario, trajectory)
        [written], _ = self.sample_actions([words], sample=False)
        action = parse_action(written, slots, scenario.task)
        return action if action is not None else f"{MALFORMED}: {' '.join(written)}"

    @torch.inference_mode()
    def sample_actions(self, contexts: list[list[str]], sample: bool = True, temperature: float = 1.0
                       ) -> tuple[list[list[str]], list[list[float]]]:
        """The next action of each context (its words up to and with EOA) and each word's log-probability under the
        policy, sampled or greedy; contexts are left-padded into one batch."""
        eoa = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id
        rows = [self.ids(words)[-(MAX_CONTEXT - MAX_ACTION_WORDS):] for words in contexts]
        width = max(len(row) for row in rows)
        input_ids = torch.tensor([[pad] * (width - len(row)) + row for row in rows])
        attention = (torch.arange(width)[None, :] >= torch.tensor([width - len(r) for r in rows])[:, None]).long()
        out = self.model.generate(input_ids=input_ids, attention_mask=attention, max_new_tokens=MAX_ACTION_WORDS,
                                  do_sample=sample, temperature=temperature if sample else None, top_k=None,
                                  top_p=None, eos_token_id=eoa, pad_token_id=pad, output_scores=True,
                                  return_dict_in_generate=True)
        new = out.sequences[:, width:]
        logprobs = torch.stack(out.scores, dim=1).float().log_softmax(-1).gather(-1, new[..., None])[..., 0]
        actions, action_logprobs = [], []
        for row, lp in zip(new.tolist(), logprobs.tolist()):
            end = row.index(eoa) + 1 if eoa in row else len(row)
            actions.append(self.tokenizer.convert_ids_to_tokens(row[:end]))
            action_logprobs.append(lp[:end])
        return actions, action_logprobs

    def save(self, folder: Path, info: dict[str, Any]) -> None:
        """Weights, tokenizer and `policy.json` (what trained it) in `folder`."""
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / POLICY_MARKER).write_text(json.dumps(info, indent=2) + "\n")


def load_policy(path: str | Path) -> AgentPolicy:
    """A saved agent policy (a relative path is also tried from the repository root, as the shipped one is named);
    InvalidInput naming the path when it is not one."""
    folder = Path(resolve_model_path(path))
    if not (folder / POLICY_MARKER).is_file():
        raise InvalidInput(Problem("policy", f"{str(path)!r} is not an agent policy folder (no {POLICY_MARKER}): "
                                             "train one with `wmstudio train-agent`, or name a scripted policy"))
    model = Qwen3ForCausalLM.from_pretrained(folder)
    model.eval()
    tokenizer = PreTrainedTokenizerFast.from_pretrained(folder)
    return AgentPolicy(model, tokenizer, folder.name)
