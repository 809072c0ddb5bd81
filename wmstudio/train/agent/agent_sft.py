"""`wmstudio train-agent`: the agent policy's warm start, supervised on the simulators' expert episodes.

Each episode (a freshly seeded scenario of a demo world, the expert playing it against the simulator) becomes one
sequence of episode words; the loss is on the policy's own words only (its actions), never on the task or on what
the tools answered. The result is a policy that already calls tools in the right format, so GRPO starts from it."""

from __future__ import annotations

import math
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F

from wmstudio.train.agent.agent_config import AgentTrainConfig
from wmstudio.train.agent.agent_policy import MAX_CONTEXT, AgentPolicy, new_policy_model, word_tokenizer
from wmstudio.train.agent.agent_text import SlotTable, action_words, prompt_words, result_words
from wmstudio.train.agent.environments import SIMULATOR, Policy, run_episode
from wmstudio.train.agent.policy_card import heldout_success, write_policy_card
from wmstudio.train.agent.scenarios import Scenario, _logged_in, make_scenario, task_text
from wmstudio.train.agent.scripted_policies import expert, signs_in_late, tries_twice
from wmstudio.world.simulators import SIMULATORS, get_simulator
from wmstudio.world.spec import Call

SFT_SEED_OFFSET = 50_000  # scenario seeds of the SFT episodes: apart from the curriculum's train and held-out states
IGNORE = -100
CODE = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b|\bE[A-Z]{3,}\b")  # REFUND_WINDOW_EXPIRED, ENOENT
DIRECTIVE_PROBES = ((), ("rate_limit",), ("auth_failure",), ("partial_success",), ("empty_result",))


@dataclass
class Episode:
    """One expert episode as the policy reads it: its words and which of them the policy wrote."""

    words: list[str]
    written: list[bool]


def expert_episode(scenario: Scenario, policy: Policy = expert) -> Episode | None:
    """The expert's (or another scripted policy's) episode on `scenario` against the simulator as words (None if an
    action cannot be written)."""
    trajectory, _ = run_episode(policy, scenario, SIMULATOR)
    slots = SlotTable()
    words = prompt_words(scenario, slots)
    written = [False] * len(words)
    actions = [step.call for step in trajectory.steps] + [trajectory.final_answer]
    for index, action in enumerate(actions):
        said = action_words(action, slots)
        if said is None:
            return None
        words += said
        written += [True] * len(said)
        if index < len(trajectory.steps):
            shown = result_words(trajectory.steps[index].response, slots)
            words += shown
            written += [False] * len(shown)
    return Episode(words, written)


def expert_episodes(count: int, seed: int = 0, late_sign_in: float = 0.0, second_try: float = 0.0) -> list[Episode]:
    """`count` expert episodes, the demo worlds taking turns, from scenario seeds no curriculum split uses; on a
    seeded `late_sign_in` share of those that need a session, the expert tries the task's call before signing in;
    on a seeded `second_try` share of the others, a call the world refuses is tried once more. With second tries,
    half the bulk tags also name an account that does not exist beside the real ones (the world refuses them in
    part, answering `partial`), so a partial answer is met with and without a second try."""
    worlds = sorted(SIMULATORS)
    rng = random.Random(f"late-{seed}")
    episodes = []
    for index in range(count):
        scenario = make_scenario(worlds[index % len(worlds)], "sft", index,
                                 SFT_SEED_OFFSET + seed * 100_000 + index)
        late = scenario.needs_login and rng.random() < late_sign_in
        if second_try and rng.random() < 0.5:
            scenario = partly_unknown(scenario, rng)
        twice = not late and rng.random() < second_try
        episode = expert_episode(scenario, signs_in_late if late else tries_twice if twice else expert)
        if episode is not None:
            episodes.append(episode)
    return episodes


def partly_unknown(scenario: Scenario, rng: random.Random) -> Scenario:
    """A feasible bulk tag (`tag_records`) whose task also names an account that does not exist: the world tags the
    others and answers `partial` with the unknown id failed, whatever is tried again. Other scenarios as they are."""
    target = scenario.target
    if target is None or not scenario.feasible or not isinstance(target.arguments.get("ids"), list):
        return scenario
    known = {str(record.get("id")) for record in scenario.world.initial_state.get("records", [])}
    unknown = f"ACC-{rng.randrange(2000, 2999)}"
    while unknown in known:
        unknown = f"ACC-{rng.randrange(2000, 2999)}"
    call = Call(target.name, {**target.arguments, "ids": [*target.arguments["ids"], unknown]})
    return replace(scenario, task=task_text(call), target=call, feasible=False)


def world_words() -> list[str]:
    """The words an answer of any simulated world can show as words (its `status` and `error`): the statuses its
    tools' schemas allow and the error codes its rules name or a directive makes it answer (RATE_LIMITED,
    TOKEN_EXPIRED...), so that a policy reads every outcome as a word of its own, never as unknown."""
    words: set[str] = set()
    for name in sorted(SIMULATORS):
        simulator = get_simulator(name)
        world = simulator.world()
        for tool in world.tools:
            status = ((tool.response or {}).get("properties") or {}).get("status") or {}
            words.update(v for v in status.get("enum", []) if isinstance(v, str))
        words.update(CODE.findall(" ".join(f"{rule.text} {rule.check or ''}" for rule in world.rules)))
        rng = random.Random(0)
        for directives in DIRECTIVE_PROBES:
            for _ in range(8):
                call = simulator.agent_call(world.initial_state, rng)
                for state in (world.initial_state, _logged_in(name, world.initial_state)):
                    _, response = simulator.step(state, call, directives)
                    words.update(str(response.get(key)) for key in ("status", "error") if response.get(key))
    return sorted(words)


def train_agent(config: AgentTrainConfig, log: Callable[[str], None] = print) -> dict:
    """Train a new policy on expert episodes within the budget, measure it on the held-out scenarios, save it with
    `policy.json` and its model card, return the summary."""
    torch.set_num_threads(config.threads)
    started = time.perf_counter()
    episodes = expert_episodes(config.episodes, config.seed, config.late_sign_in, config.second_try)
    words = sorted({word for episode in episodes for word in episode.words} | set(world_words()))
    tokenizer = word_tokenizer(words)
    model = new_policy_model(tokenizer, layers=config.layers, hidden=config.hidden, heads=config.heads,
                             ffn=config.hidden * 3, seed=config.seed)
    policy = AgentPolicy(model, tokenizer, config.out.name)
    rows = [(policy.ids(e.words)[:MAX_CONTEXT], e.written[:MAX_CONTEXT]) for e in episodes]
    log(f"{len(rows)} expert episodes, {sum(len(r[0]) for r in rows)} words, vocabulary {len(tokenizer)}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters ({time.perf_counter() - started:.1f} s)")
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
    rng = random.Random(config.seed)
    budget = config.minutes * 60.0
    loop_start = time.perf_counter()
    step, losses = 0, []
    model.train()
    while True:
        elapsed = time.perf_counter() - loop_start
        if elapsed >= budget or (config.steps is not None and step >= config.steps):
            break
        progress = elapsed / budget if config.steps is None else max(elapsed / budget, step / config.steps)
        for group in optimizer.param_groups:
            group["lr"] = config.learning_rate * (min(1.0, (step + 1) / 20) * 0.5 * (1 + math.cos(math.pi * progress)))
        batch = rng.sample(rows, min(config.batch, len(rows)))
        input_ids, labels, attention = _padded(batch, tokenizer.pad_token_id)
        loss = _sft_loss(model, input_ids, attention, labels, config.label_smoothing)
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        step += 1
        if step % 50 == 0:
            log(f"step {step}: loss {sum(losses[-50:]) / len(losses[-50:]):.3f} ({time.perf_counter() - loop_start:.0f} s)")
    model.eval()
    info = {"kind": "agent-policy", "trained_by": "wmstudio train-agent (SFT on expert episodes)",
            "episodes": len(rows), "steps": step, "seconds": round(time.perf_counter() - loop_start, 1),
            "final_loss": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4),
            "parameters": sum(p.numel() for p in model.parameters()),
            "config": {k: str(v) if k == "out" else v for k, v in vars(config).items()}}
    info["heldout"] = heldout_success(policy.act)
    log(f"held-out success against the simulators: {info['heldout']['successes']}/{info['heldout']['scenarios']}")
    policy.save(config.out, info)
    write_policy_card(config.out)
    return info


def _sft_loss(model, input_ids: torch.Tensor, attention: torch.Tensor, labels: torch.Tensor,
              label_smoothing: float) -> torch.Tensor:
    """Next-word cross-entropy on the policy's own words; with `label_smoothing`, part of each target's probability
    is spread over the vocabulary, so the policy stays sure of its demonstrations but not certain."""
    if not label_smoothing:
        return model(input_ids=input_ids, attention_mask=attention, labels=labels).loss
    logits = model(input_ids=input_ids, attention_mask=attention).logits[:, :-1]
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100,
                           label_smoothing=label_smoothing)


def _padded(batch: list[tuple[list[int], list[bool]]], pad: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Right-padded ids, labels (IGNORE except the policy's own words) and attention mask of a batch."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad)
    labels = torch.full((len(batch), width), IGNORE)
    attention = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, written) in enumerate(batch):
        input_ids[row, :len(ids)] = torch.tensor(ids)
        attention[row, :len(ids)] = 1
        labels[row, :len(ids)] = torch.tensor([i if w else IGNORE for i, w in zip(ids, written)])
    return input_ids, labels, attention
