"""The settings of agent training: the SFT warm start (`train-agent`) and GRPO (`train-grpo`), one dataclass each.

Kept apart from the trainers (no torch here) so both commands' `--help` is generated from these cheaply; each
field's help text is what the command shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmstudio.locations import MODELS_DIR, REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import number_in, setting, setting_problems, whole_in
from wmstudio.train.agent.environment_kinds import ENVIRONMENT_HELP, ENVIRONMENTS

DEFAULT_POLICY = (MODELS_DIR / "agent-small").relative_to(REPO_ROOT).as_posix()  # the shipped SFT policy
MAX_BATCH = 64  # scenarios a step, rollouts a scenario: a step plays their product, each a whole episode
MAX_STEPS = 10_000  # GRPO steps of one run
MAX_SEED = 2**31 - 1
POLICY_MARKER = "policy.json"  # beside a policy's weights: says the folder is an agent policy, and how it reads


def _positive(problems: list[Problem], name: str, value: Any, whole: bool = False) -> None:
    if not (whole_in(value, 1) if whole else number_in(value, above=0)):
        problems.append(Problem(name, f"must be a positive {'whole ' if whole else ''}number, got {value!r}"))


@dataclass
class AgentTrainConfig:
    """Train an agent policy by SFT on the simulators' expert episodes (the warm start of GRPO).

    Episodes come from freshly seeded scenarios of the five demo worlds (never the curriculum's held-out states)."""

    REQUIRED = ("out",)

    out: Path = setting(None, "Policy folder to write, e.g. assets/models/agent-small.")
    episodes: int = setting(600, "Expert episodes to learn from (spread over the five worlds).")
    minutes: float = setting(2.0, "Wall-clock budget of the training loop in minutes.")
    steps: int | None = setting(None, "Stop after this many optimizer steps (whichever comes first).")
    batch: int = setting(16, "Episodes per optimizer step.")
    learning_rate: float = setting(3e-3, "Peak learning rate (AdamW, cosine decay).")
    layers: int = setting(3, "Transformer layers.")
    hidden: int = setting(96, "Width.")
    heads: int = setting(4, "Attention heads.")
    seed: int = setting(0, "Seed for the scenarios, initialisation and batching.")
    threads: int = setting(1, "CPU threads for torch.")
    label_smoothing: float = setting(0.0, "Share of each target word's probability spread over the vocabulary: a "
                                          "policy trained to certainty samples the same episode every time, and "
                                          "GRPO learns nothing from a group that agrees (0: plain cross-entropy).")
    late_sign_in: float = setting(0.0, "Share of the episodes that need a session in which the expert first tries "
                                       "the task's call, is refused by the world (UNAUTHENTICATED), signs in and "
                                       "calls again: ordinary episodes where an answer's error changes what the "
                                       "policy does next (0: the expert always signs in first).")
    second_try: float = setting(0.0, "Share of the other episodes in which a call the world refuses is tried once "
                                     "more before the answer (the world's own refusals: the second try fails too, "
                                     "so no recovery is shown; 0: the expert answers at once).")

    def __post_init__(self) -> None:
        if self.out is None:
            raise InvalidInput(Problem("out", "required: give a folder"))
        self.out = Path(self.out)
        problems: list[Problem] = []
        for name in ("episodes", "batch", "layers", "hidden", "heads", "threads"):
            _positive(problems, name, getattr(self, name), whole=True)
        for name in ("minutes", "learning_rate"):
            _positive(problems, name, getattr(self, name))
        if self.steps is not None:
            _positive(problems, "steps", self.steps, whole=True)
        for name in ("late_sign_in", "second_try"):
            if not number_in(getattr(self, name), 0.0, 1.0):
                problems.append(Problem(name, f"must be a share from 0 to 1, got {getattr(self, name)!r}"))
        if not number_in(self.label_smoothing, 0.0, below=1.0):
            problems.append(Problem("label_smoothing", f"must be a share from 0 to below 1, got {self.label_smoothing!r}"))
        if not problems and self.hidden % self.heads:
            problems.append(Problem("hidden", f"must be a multiple of --heads ({self.heads}), got {self.hidden}"))
        if problems:
            raise InvalidInput(problems)


@dataclass
class GrpoSettings:
    """Train an agent policy with GRPO (TRL) on a curriculum, the world model answering its calls.

    The job records its status and per-step metrics in the studio's database; `--resume` continues a run from its
    newest checkpoint."""

    curriculum: str = setting("demo", "The curriculum whose training scenarios the policy plays: demo (the five "
                                      "simulated worlds), adversarial (recovering from a failed first try) or a "
                                      "saved curriculum with scenarios.")
    env: str = setting("world-model", ENVIRONMENT_HELP, choices=ENVIRONMENTS)
    policy: str = setting(DEFAULT_POLICY, "The policy to start from: a `train-agent` folder, or a chat model by "
                                          "hub id or folder (e.g. Qwen/Qwen3-0.6B, on a GPU).")
    model: str | None = setting(None, "The world model (default: the embedded MDLM).")
    world_model_url: str | None = setting(None, "Send the world model's calls to a `wmstudio serve-wm` at this "
                                                "address (e.g. http://127.0.0.1:8000; its key from "
                                                "WMSTUDIO_API_KEY) instead of loading one in each process.")
    max_steps: int = setting(60, "GRPO steps (each plays --scenarios-per-step scenarios x --generations).",
                             label="Max steps", low=1, high=MAX_STEPS)
    minutes: float = setting(20.0, "Wall-clock budget; training stops at the first step past it.")
    generations: int = setting(8, "Rollouts per scenario (the group whose rewards are compared).",
                               label="Rollouts per scenario", low=2, high=MAX_BATCH)
    scenarios_per_step: int = setting(4, "Different training scenarios each step plays (the curriculum needs at "
                                         "least this many).", label="Scenarios per step", low=1, high=MAX_BATCH)
    learning_rate: float = setting(1e-4, "Learning rate (AdamW).")
    beta: float = setting(0.02, "KL penalty towards the starting policy.")
    temperature: float = setting(1.0, "Sampling temperature of the rollouts.")
    min_reachable: float = setting(0.1, "Before training, the policy plays groups of up to 24 training scenarios as "
                                        "a step would; the run is refused when fewer than this share of some "
                                        "family's groups have any success (GRPO learns nothing from a group that "
                                        "all fails). 0: no probe.")
    save_every: int = setting(10, "Checkpoint every N steps (resume continues from the newest).", low=1)
    seed: int = setting(0, "Seed of TRL, the sampling and the world model.", low=0, high=MAX_SEED)
    out: Path | None = setting(None, "Run folder (default: the run's folder in the studio's data folder).")
    db: Path | None = setting(None, "The studio database (default: WMSTUDIO_DB or the user data folder).")
    run_id: int | None = setting(None, "Report into this queued run (the studio's Train tab starts jobs so).")
    resume: bool = setting(False, "Continue the run from its newest checkpoint.")
    threads: int = setting(1, "CPU threads for torch (one is fastest for these small models).", low=1)
    lora_rank: int = setting(0, "Train LoRA adapters of this rank (peft) instead of every weight; they are merged "
                                "into the saved policy (0: full fine-tuning).", low=0)
    json: bool = setting(False, "Print only the JSON result.")

    def __post_init__(self) -> None:
        """Every field checked against its declaration (bounds, choices), then what a declaration cannot say."""
        problems = [Problem(name, message) for name, message in setting_problems(self)]
        if not isinstance(self.curriculum, str) or not self.curriculum.strip():
            problems.append(Problem("curriculum", "give a curriculum name, e.g. demo"))
        if not isinstance(self.policy, (str, Path)) or not str(self.policy).strip():
            problems.append(Problem("policy", "give the folder of a policy `wmstudio train-agent` made, or a chat "
                                              "model's hub id"))
        for name in ("minutes", "learning_rate", "temperature"):
            _positive(problems, name, getattr(self, name))
        if not number_in(self.min_reachable, 0, 1):
            problems.append(Problem("min_reachable", f"must be a share from 0 to 1, got {self.min_reachable!r}"))
        if not number_in(self.beta, 0):
            problems.append(Problem("beta", f"must be a number from 0, got {self.beta!r}"))
        if problems:
            raise InvalidInput(problems)
        self.out = None if self.out is None else Path(self.out)
        self.db = None if self.db is None else Path(self.db)
