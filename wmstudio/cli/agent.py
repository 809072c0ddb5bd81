"""The agent: `train-agent` (SFT warm start), `train-grpo` (GRPO as a recorded run), `runs list|show|cancel|resume`
(what the Train tab does) and `evaluate` (a policy's success estimated from world-model rollouts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from wmstudio.cli.common import DB_HELP, emit, fail, open_store
from wmstudio.cli.options import config_command, grounding_option
from wmstudio.locations import DEFAULT_MODEL
from wmstudio.problems import InvalidInput
from wmstudio.studio.training import ENVIRONMENT_HELP, AgentTrainConfig, GrpoSettings, environment_kind
from wmstudio.world.grounding import Grounding

commands = typer.Typer()
runs_app = typer.Typer(help="GRPO training runs: list them, show one, cancel or resume it (what the Train tab does).",
                       no_args_is_help=True)


def _train_agent(config) -> None:
    from wmstudio.studio.training import train_agent

    emit(train_agent(config, log=lambda text: typer.echo(text, err=True)))


config_command(commands, "train-agent", AgentTrainConfig, _train_agent)


def _train_grpo(settings) -> None:
    """Run GRPO as a recorded job (`train/agent/jobs.py` owns its life: the run claimed for this process, its status,
    metrics and episodes recorded), with a progress line per step on stderr."""
    from wmstudio.studio.runs import train_recorded

    def on_step(step: int, values: dict[str, float]) -> None:
        shown = {k: round(v, 4) for k, v in values.items() if k in ("reward", "success", "kl")}
        if settings.json:  # stdout stays the one JSON report; the progress is a JSON line on stderr
            typer.echo(json.dumps({"step": step, "max_steps": settings.max_steps, **shown}), err=True)
            return
        done = min(1.0, step / settings.max_steps)
        bar = "#" * int(done * 30) + "." * (30 - int(done * 30))
        typer.echo(f"[{bar}] step {step}/{settings.max_steps} " + " ".join(f"{k} {v:.3f}" for k, v in shown.items()),
                   err=True)

    result = train_recorded(settings, log=lambda text: typer.echo(text, err=True), on_step=on_step)
    if result is not None:  # None: one of torchrun's other processes, which rank 0 reports for
        emit(result)


config_command(commands, "train-grpo", GrpoSettings, _train_grpo)


@runs_app.command("list")
def runs_list(db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Every run, newest first, with its status as it is now (a run whose process is gone is marked failed)."""
    from wmstudio.studio.runs import run_json, runs_now

    store = open_store(db)
    emit([run_json(store, run) for run in runs_now(store)])


@runs_app.command("show")
def runs_show(
    run_id: int = typer.Argument(..., help="The run's id (see `wmstudio runs list`)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """One run: status, settings, last value of each metric, checkpoints and the last lines of its log."""
    from wmstudio.studio.runs import get_run, refresh_jobs, run_json

    store = open_store(db)
    refresh_jobs(store)
    emit(run_json(store, get_run(store, run_id), detail=True))


@runs_app.command("cancel")
def runs_cancel(
    run_id: int = typer.Argument(..., help="The queued or running run to stop."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Stop a run (SIGTERM, then SIGKILL after 10 s); it is recorded as cancelled and can be resumed."""
    from wmstudio.studio.runs import cancel_job, run_json

    store = open_store(db)
    emit(run_json(store, cancel_job(store, run_id)))


@runs_app.command("resume")
def runs_resume(
    run_id: int = typer.Argument(..., help="The failed or cancelled run to continue."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Continue a failed or cancelled run from its newest checkpoint, in the background (same run, same settings);
    follow it with `wmstudio runs show`."""
    from wmstudio.studio.runs import resume_job, run_checkpoints, run_json

    store = open_store(db)
    run = resume_job(store, run_id)
    emit({**run_json(store, run), "from_checkpoint": run_checkpoints(run, store.path)[-1].name, "log": run.log_path})


@commands.command("evaluate")
def evaluate_cmd(
    policy: str = typer.Option(..., "--policy", help="A scripted policy (expert, recovering, tries-twice, "
                                                     "retry-once, noisy or random) or a trained policy's folder "
                                                     "(train-agent, train-grpo)."),
    curriculum: str = typer.Option("demo", "--curriculum", help="The scenarios: demo (the five simulated worlds), "
                                                                 "adversarial (recovering from a failed first try) or "
                                                                 "a saved curriculum with scenarios."),
    split: str = typer.Option("heldout", "--split", help="train or heldout."),
    env: str = typer.Option("world-model", "--env", help=ENVIRONMENT_HELP),
    episodes: Optional[int] = typer.Option(None, "--episodes", min=1, help="Scenarios to play (default: all)."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The world model."),
    world_model_url: Optional[str] = typer.Option(None, "--world-model-url", help="Send the world model's calls to "
                                                  "a `wmstudio serve-wm` at this address instead (its key from "
                                                  "WMSTUDIO_API_KEY)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the noisy and random policies."),
    grounding: Grounding = grounding_option(),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON report."),
) -> None:
    """Estimate a policy's success rate from world-model rollouts alone (with a 95% interval), beside the ground
    truth from the simulators on the same scenarios (off-policy evaluation)."""
    from wmstudio.model.network.sources import check_model_source
    from wmstudio.studio.training import policy_for

    def progress(done: int, total: int) -> None:
        if not as_json:
            typer.echo(f"\r{done}/{total} episodes", err=True, nl=done == total)

    chosen = policy_for(policy, seed)  # the inputs first: the model libraries take seconds to load
    from wmstudio.studio.training import curriculum_scenarios, split_of

    scenarios = split_of(curriculum_scenarios(open_store(db), curriculum), split)[:episodes]
    try:
        kind = environment_kind(env, "--env")
    except InvalidInput as err:
        fail(str(err))
    if kind.needs_model and world_model_url is None:
        check_model_source(model)
    from wmstudio.studio.training import evaluate_policy, report, world_model_for

    backend = world_model_for(env, model, world_model_url)
    estimate = evaluate_policy(chosen, scenarios, backend, env, progress, grounding)
    data = report(policy, curriculum, split, estimate)
    if not as_json:
        typer.echo(f"{policy} on {curriculum}/{split} in {env}: {data['estimate']:.1%} "
                   f"[{data['ci95'][0]:.1%}, {data['ci95'][1]:.1%}], ground truth {data['ground_truth']:.1%}", err=True)
        for family, figures in data.get("per_family", {}).items():
            typer.echo(f"  {family}: {figures['estimate']:.1%} of {figures['episodes']}, ground truth "
                       f"{figures['ground_truth']:.1%}", err=True)
    emit(data)
