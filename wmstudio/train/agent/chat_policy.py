"""A chat LLM as the agent policy: any causal LM with a chat template (a hub id such as `Qwen/Qwen3-0.6B`, or a
folder), reading the task and the tools' answers as chat turns and calling tools in its template's format.

The shipped `agent_policy` reads episode words with slot tokens and is sized for this CPU; a real instruction-tuned
model reads chat. It gets the world's tools through its chat template (`tools=`), the credentials the state gives
and the task as the user turn, and writes either a tool call, `<tool_call>{"name": ..., "arguments": {...}}
</tool_call>` as Qwen3, LFM2 and most ChatML templates do (a bare JSON object with "name" and "arguments" is read
too), or its final answer (a refused task is reported by starting with "Could not"). The world's answers go back
as `tool` turns rendered by the same template; in GRPO they are environment tokens, never trained on."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from wmstudio.problems import InvalidInput, Problem
from wmstudio.train.agent.agent_config import POLICY_MARKER
from wmstudio.train.agent.environments import Action, Turn
from wmstudio.train.agent.policy_sampling import sample_replies
from wmstudio.train.agent.scenarios import COULD_NOT, MALFORMED, Scenario, Trajectory
from wmstudio.world.spec import Call

CHAT_KIND = "chat-policy"  # `kind` in policy.json of a chat policy saved by train-grpo
MAX_ACTION_TOKENS = 128  # one turn's tool call or answer
TURN_ENDS = ("<|im_end|>", "<|eot_id|>", "<end_of_turn>")  # end-of-turn markers of common chat templates
SYSTEM_PROMPT = ("You act for a user through the tools you are given. Call one tool at a time and wait for its "
                 "answer. When you are finished, reply in one sentence without calling a tool; if the world refused "
                 f'the task, start that reply with "{COULD_NOT}".')
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.S)


def parse_chat_action(text: str) -> Action | None:
    """A tool call (tagged, or a bare JSON object with `name` and `arguments`), else the final answer; None for
    a call that does not parse or an empty reply (the episode ends malformed)."""
    text = _THINKING.sub("", text).strip()
    tagged = _TOOL_CALL.search(text)
    body = tagged.group(1) if tagged else text
    if tagged or (body.startswith("{") and '"name"' in body):
        try:
            value = json.loads(body)
        except json.JSONDecodeError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        arguments = value.get("arguments", {})
        if isinstance(arguments, str):  # some templates write the arguments as a JSON string
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError:
                return None
        return Call(value["name"], arguments) if isinstance(arguments, dict) else None
    return text or None


@dataclass
class ChatEpisode:
    """One episode as a conversation: its messages and the token ids the policy has read and written so far."""

    scenario: Scenario
    messages: list[dict[str, Any]]
    ids: list[int] = field(default_factory=list)


@dataclass
class ChatPolicy:
    """A causal LM with a chat template, played turn by turn; `name` for reports."""

    model: Any
    tokenizer: Any
    name: str = CHAT_KIND

    def with_model(self, model: Any) -> ChatPolicy:
        """The same policy reading through `model` (the one a trainer is updating)."""
        return ChatPolicy(model, self.tokenizer, self.name)

    def begin(self, scenario: Scenario) -> tuple[ChatEpisode, list[int]]:
        """The episode's opening conversation and its prompt ids."""
        messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user_turn(scenario)}]
        episode = ChatEpisode(scenario, messages, self._render(scenario, messages, generation=True))
        return episode, list(episode.ids)

    def sample_turns(self, episodes: list[ChatEpisode], sample: bool = True, temperature: float = 1.0) -> list[Turn]:
        """Each episode's next reply (sampled or greedy) with its tokens' log-probabilities, parsed as an action;
        the reply joins the episode."""
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        replies, logprobs = sample_replies(self.model, [e.ids for e in episodes], pad,
                                           _stop_ids(self.model, self.tokenizer), MAX_ACTION_TOKENS, sample,
                                           temperature)
        turns = []
        for episode, reply, lp in zip(episodes, replies, logprobs):
            text = self.tokenizer.decode(reply, skip_special_tokens=True)
            episode.ids += reply
            episode.messages.append({"role": "assistant", "content": text})
            turns.append(Turn(reply, lp, parse_chat_action(text), text))
        return turns

    def observe(self, episode: ChatEpisode, response: str) -> list[int]:
        """The world's answer as a `tool` turn (and the opening of the policy's next turn): the ids that follow the
        policy's reply, as its template renders them."""
        before = self._text(episode.scenario, episode.messages, generation=False)
        episode.messages.append({"role": "tool", "content": response})
        after = self._text(episode.scenario, episode.messages, generation=True)
        end = next((m for m in (self.tokenizer.eos_token, *TURN_ENDS) if m and m in before), "")
        shown = self.tokenizer(after[_after_turns(after, before.count(end), end):],
                               add_special_tokens=False)["input_ids"]
        episode.ids += shown
        return shown

    def act(self, scenario: Scenario, trajectory: Trajectory) -> Action:
        """The policy's next action, greedy, after the episode so far (a `Policy` for evaluation)."""
        episode, _ = self.begin(scenario)
        for step in trajectory.steps:
            call = json.dumps({"name": step.call.name, "arguments": step.call.arguments}, ensure_ascii=False)
            episode.messages.append({"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"})
            episode.messages.append({"role": "tool", "content": step.response})
        episode.ids = self._render(scenario, episode.messages, generation=True)
        [turn] = self.sample_turns([episode], sample=False)
        return turn.action if turn.action is not None else f"{MALFORMED}: {turn.text}"

    def save(self, folder: Path, info: dict[str, Any]) -> None:
        """Weights, tokenizer (with its chat template) and `policy.json` saying how it reads."""
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        (folder / POLICY_MARKER).write_text(json.dumps({**info, "kind": CHAT_KIND}, indent=2) + "\n")

    def _text(self, scenario: Scenario, messages: list[dict[str, Any]], generation: bool) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tool_specs(scenario), tokenize=False,
                                                  add_generation_prompt=generation)

    def _render(self, scenario: Scenario, messages: list[dict[str, Any]], generation: bool) -> list[int]:
        return self.tokenizer(self._text(scenario, messages, generation), add_special_tokens=False)["input_ids"]


def user_turn(scenario: Scenario) -> str:
    """The task, with the credentials the world's state gives the agent (what a user would paste in)."""
    state = scenario.world.initial_state
    login = state.get("login") if isinstance(state, dict) else None
    if isinstance(login, dict):
        return f"{scenario.task}\nYour credentials: {json.dumps(login, ensure_ascii=False)}"
    return scenario.task


def tool_specs(scenario: Scenario) -> list[dict[str, Any]]:
    """The world's tools in the OpenAI function form chat templates take."""
    return [{"type": "function", "function": {"name": tool.name, "description": tool.description,
                                              "parameters": tool.parameters}} for tool in scenario.world.tools]


def load_chat_policy(source: str) -> ChatPolicy:
    """A chat LM from a folder or the hub; InvalidInput when it has no chat template to read episodes with."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModelForCausalLM.from_pretrained(source)
    except (OSError, ValueError) as err:
        raise InvalidInput(Problem("policy", f"{source!r} is neither an agent policy folder nor a causal LM on the "
                                             f"hub or on disk ({err}): train one with `wmstudio train-agent`")) from err
    if not getattr(tokenizer, "chat_template", None):
        raise InvalidInput(Problem("policy", f"{source!r} has no chat template: give an instruction-tuned model "
                                             "(e.g. Qwen/Qwen3-0.6B) or a `wmstudio train-agent` folder"))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    if torch.cuda.is_available():
        model = model.to("cuda")
    model.eval()
    return ChatPolicy(model, tokenizer, Path(source).name or source)


def _stop_ids(model: Any, tokenizer: Any) -> list[int]:
    """The ids that end a reply: the tokenizer's end of turn and the model's generation EOS ids."""
    configured = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = configured if isinstance(configured, list) else [configured]
    return sorted({i for i in [tokenizer.eos_token_id, *ids] if isinstance(i, int)})


def _after_turns(text: str, turns: int, end: str) -> int:
    """The position after the `turns`-th end-of-turn marker of `text`: where the reply the policy wrote ends, even
    when the template renders earlier replies differently once a turn follows them (Qwen3 drops their empty
    thinking block)."""
    position = 0
    for _ in range(turns if end else 0):
        found = text.find(end, position)
        if found < 0:
            return position
        position = found + len(end)
    return position
