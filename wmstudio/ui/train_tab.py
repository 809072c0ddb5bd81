"""The Train tab: start a GRPO run of the agent in the background, watch its curves and episodes grow, cancel
it or resume it from its newest checkpoint.

The training process writes the store and its run folder; this tab only reads them, on a timer (every 2 s
while a run is live, every 10 s otherwise), and redraws a part only when what it shows has changed."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
import plotly.graph_objects as go
from gradio.context import Context
from plotly.subplots import make_subplots

from wmstudio.problems import InvalidInput, Problem
from wmstudio.settings import form_value, setting_specs
from wmstudio.studio.context import StudioContext
from wmstudio.studio.runs import (
    DEMO_CURRICULUM,
    ENVIRONMENT_HELP,
    ENVIRONMENTS,
    LIVE_STATUSES,
    MAX_STEPS,
    Store,
    cancel_job,
    get_run,
    latest_episodes,
    list_runs,
    log_tail,
    logged_steps,
    refresh_jobs,
    resume_job,
    run_checkpoints,
    run_metrics,
    run_result,
    start_job,
)
from wmstudio.studio.training import GrpoSettings
from wmstudio.ui.messages import failure_markdown
from wmstudio.ui.scenarios_panel import build_scenarios_panel, missing_scenarios, trainable_curricula
from wmstudio.ui.setting_widgets import setting_widget

CURVES = {"reward": "Reward", "success": "Success rate", "kl": "KL to the reference",
          "completion_length": "Completion length (tokens)", "valid_call_rate": "Valid-call rate", "loss": "Loss"}
RUN_COLUMNS = ["id", "status", "env", "steps logged", "started", "finished", "error"]
LIVE_REFRESH_S, IDLE_REFRESH_S = 2.0, 10.0
RUNS_SHOWN = 50
EPISODES_SHOWN = 5
MAX_LINE_CHARS = 600
KEPT = "nothing was changed"
GRPO_SPECS = {spec.name: spec for spec in setting_specs(GrpoSettings)}  # the one declaration: defaults, bounds
BATCH_SPECS = {name: GRPO_SPECS[name] for name in ("scenarios_per_step", "generations")}
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # owner/name, as the hub spells model ids


@dataclass
class RunView:
    """What the page shows of the selected run: a status line, the curves, episodes and the log's tail;
    `signature` changes whenever any of them would (so an unchanged run is not redrawn)."""

    status: str
    figure: go.Figure
    heldout: go.Figure
    episodes: str
    log: str
    live: bool  # queued or running: what Cancel acts on
    signature: str


# --- rendering ------------------------------------------------------------------------------------------------


def runs_table(store: Store) -> tuple[list[list[Any]], list[tuple[str, int]], bool]:
    """The newest runs as table rows, as dropdown choices, and whether any of them is queued or running."""
    runs = list_runs(store)[:RUNS_SHOWN]
    steps = logged_steps(store, [run.id for run in runs])
    rows = [[run.id, run.status, run.config.get("env", ""), steps[run.id],
             _when(run.started_at), _when(run.finished_at) if run.status not in LIVE_STATUSES else "",
             _one_line(run.error, 160)] for run in runs]
    choices = [(f"#{run.id} · {run.config.get('env', '?')} · {run.config.get('max_steps', '?')} steps", run.id)
               for run in runs]
    return rows, choices, any(run.status in LIVE_STATUSES for run in runs)


def curves_figure(store: Store, run_id: int | None) -> tuple[go.Figure, int]:
    """One panel per metric in CURVES (value against step; the last value wins where a resumed run logged a
    step twice), and how many values there are."""
    series: dict[str, dict[int, float]] = {name: {} for name in CURVES}
    rows = run_metrics(store, run_id) if run_id is not None else []
    for row in rows:
        if row.name in series:
            series[row.name][row.step] = row.value
    figure = make_subplots(rows=2, cols=3, subplot_titles=list(CURVES.values()), horizontal_spacing=0.07,
                           vertical_spacing=0.18)
    for index, (name, points) in enumerate(series.items()):
        steps, place = sorted(points), {"row": index // 3 + 1, "col": index % 3 + 1}
        figure.add_trace(go.Scatter(x=steps, y=[points[s] for s in steps], mode="lines+markers", name=CURVES[name],
                                    marker={"size": 4}, showlegend=False), **place)
        if rows and not steps:
            figure.add_annotation(text="not logged", showarrow=False, font={"color": "gray"},
                                  x=0.5, y=0.5, xref=f"x{index + 1} domain", yref=f"y{index + 1} domain")
    last_step = max((row.step for row in rows), default=0)
    figure.update_xaxes(title_text="step", title_standoff=2, rangemode="tozero", dtick=1 if last_step < 10 else None)
    figure.update_layout(height=480, margin={"l": 40, "r": 10, "t": 40, "b": 40})
    if not rows:
        figure.add_annotation(text="No steps logged yet", x=0.5, y=0.5, xref="paper", yref="paper",
                              showarrow=False, font={"size": 16})
    return figure, len(rows)


def episodes_markdown(episodes: list[dict[str, Any]]) -> str:
    """The run's latest episodes, newest first, each as its task and transcript."""
    if not episodes:
        return "_No episodes yet: they appear after the first training step._"
    parts = []
    for episode in reversed(episodes):
        success = "✓ success" if episode.get("success") else "✗ no success"
        reward = episode.get("reward")
        reward_text = f"reward {reward:.2f}" if isinstance(reward, (int, float)) else "reward —"
        head = (f"**Step {episode.get('step', '?')}** · `{_one_line(episode.get('scenario', '?'), 80)}` · "
                f"{success} · {reward_text}")
        transcript = episode.get("transcript") or []
        lines = transcript if isinstance(transcript, list) else [str(transcript)]
        body = "\n".join(_one_line(line, MAX_LINE_CHARS) for line in lines) or "(no calls)"
        parts.append(f"{head}\n\n> {_one_line(episode.get('task', ''), 400)}\n\n{_fenced(body)}")
    return "\n\n---\n\n".join(parts)


def run_view(store: Store, run_id: int | None) -> RunView:
    """The selected run's status line (with a finished run's held-out success before -> after), curves, held-out
    chart, latest episodes and log tail."""
    if run_id is None:
        figure, _ = curves_figure(store, None)
        return RunView("Start a run, or pick one in the list.", figure, heldout_figure(None), "", "", False, "none")
    run = get_run(store, run_id)
    figure, points = curves_figure(store, run_id)
    episodes = latest_episodes(run_id, store.path, EPISODES_SHOWN)
    log = log_tail(run_id, store.path)
    saved = run_checkpoints(run, store.path)
    result = run_result(run, store.path) if run.status == "finished" else None
    version = run.config.get("curriculum_version")
    parts = [f"**Run #{run.id}** · {run.status}",
             f"env `{run.config.get('env', '?')}`",
             f"curriculum `{run.config.get('curriculum', '?')}`" + (f" v{version}" if version else ""),
             f"max steps {run.config.get('max_steps', '?')}", f"pid {run.pid or '—'}",
             f"{len(saved)} checkpoint(s)" + (f", newest `{saved[-1].name}`" if saved else "")]
    status = " · ".join(parts) + (f"\n\nError: {_one_line(run.error, 1000)}" if run.error else "")
    if result is not None:
        status += "\n\n" + heldout_sentence(result)
    signature = json.dumps([run.id, run.status, run.error, run.pid, points, len(saved),
                            [e.get("step") for e in episodes], len(log), log[-200:], result is not None])
    return RunView(status, figure, heldout_figure(result), episodes_markdown(episodes), log,
                   run.status in LIVE_STATUSES, signature)


def heldout_sentence(result: dict[str, Any]) -> str:
    """A finished run's held-out success before -> after, judged by the simulators, overall and by family."""
    before, after = result.get("heldout_success_before"), result.get("heldout_success_after")
    if before is None or after is None:
        return "Held-out success: unmeasured (no held-out scenario's world has a simulator to judge it)."
    families = result.get("heldout_by_family") or {}
    each = ", ".join(f"{name} {_share(pair[0])} → {_share(pair[1])}" for name, pair in families.items())
    return (f"**Held-out success (judged by the simulators): {_share(before)} → {_share(after)}**"
            + (f" · by family: {each}" if each else ""))


def heldout_figure(result: dict[str, Any] | None) -> go.Figure:
    """Held-out success before and after the run, overall and by family, as bars (empty before a run finishes)."""
    figure = go.Figure()
    if result is not None and result.get("heldout_success_after") is not None:
        families = result.get("heldout_by_family") or {}
        names = ["all", *families]
        before = [result.get("heldout_success_before"), *(pair[0] for pair in families.values())]
        after = [result.get("heldout_success_after"), *(pair[1] for pair in families.values())]
        figure.add_trace(go.Bar(x=names, y=before, name="before (the start policy)", marker_color="#9ca3af"))
        figure.add_trace(go.Bar(x=names, y=after, name="after the run", marker_color="#2563eb"))
        figure.update_yaxes(range=[0, 1], tickformat=".0%")
    else:
        figure.add_annotation(text="Held-out success shows here when a run finishes", x=0.5, y=0.5, xref="paper",
                              yref="paper", showarrow=False, font={"size": 14, "color": "gray"})
        figure.update_xaxes(visible=False)
        figure.update_yaxes(visible=False)
    figure.update_layout(height=260, barmode="group", margin={"l": 40, "r": 10, "t": 30, "b": 40},
                         title={"text": "Held-out success, judged by the simulators", "font": {"size": 13}})
    return figure


def _share(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, (int, float)) else "—"


# --- handlers: plain functions of the form values -------------------------------------------------------------


def read_max_steps(value: Any) -> int:
    """The Max steps field as a whole number from 1 to MAX_STEPS; InvalidInput naming the field otherwise."""
    text = str(value if value is not None else "").strip()
    try:
        number = float(text)
    except ValueError:
        raise InvalidInput(Problem("Max steps", f"{text!r} is not a number: give a whole number from 1 to "
                                                f"{MAX_STEPS:,}")) from None
    if not number.is_integer() or not 1 <= number <= MAX_STEPS:
        raise InvalidInput(Problem("Max steps", f"{text} is not a whole number from 1 to {MAX_STEPS:,}: "
                                                "give the number of training steps, e.g. 20"))
    return int(number)


def read_run_id(value: Any) -> int:
    """The selected run's id; InvalidInput asking to pick one when none is selected."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise InvalidInput(Problem("Run", "pick a run in the list (or start one) first")) from None


def start_run(store: Store, curriculum: Any, env: Any, max_steps: Any, policy: Any = "", scenarios_per_step: Any = None,
              generations: Any = None) -> tuple[int, str]:
    """Start a run from the form; its id and a message saying what happens next. A run that could not build a
    step (too few training scenarios for the batch) is refused with the fix before it starts."""
    if env not in ENVIRONMENTS:
        raise InvalidInput(Problem("Environment", f"choose one of {', '.join(ENVIRONMENTS)}"))
    missing = missing_scenarios(store, curriculum)
    if missing:  # refused here, not by the run a moment later
        raise InvalidInput(Problem("Curriculum", missing))
    batch = {spec.name: form_value(spec, value) for spec, value in
             ((BATCH_SPECS["scenarios_per_step"], scenarios_per_step), (BATCH_SPECS["generations"], generations))}
    run = start_job(store, curriculum=str(curriculum or DEMO_CURRICULUM), env=env, max_steps=read_max_steps(max_steps),
                    db_path=store.path, policy=read_policy(policy), **batch)
    return run.id, (f"Started run #{run.id} (pid {run.pid}) in the background: its curves appear here as it "
                    "logs steps, and it keeps training if you close the page.")


def read_policy(value: Any) -> str | None:
    """The policy field: empty for the shipped agent policy, a local folder (train-agent's or train-grpo's), or a
    chat model's hub id (`owner/name`, loaded by the run: it needs the hub or a cache). InvalidInput otherwise."""
    text = str(value or "").strip()
    if not text:
        return None
    if Path(text).expanduser().is_dir():
        return str(Path(text).expanduser())
    if HUB_ID.fullmatch(text):
        return text
    raise InvalidInput(Problem("Policy", f"no folder {text!r} here and not a hub id (owner/name): give a policy "
                                         "folder, a chat model's hub id such as Qwen/Qwen3-0.6B, or leave it empty"))


def cancel_run(store: Store, run_id: Any) -> str:
    """Cancel the selected run; a message saying how it ended."""
    run = cancel_job(store, read_run_id(run_id))
    return f"Run #{run.id} is {run.status}."


def resume_run(store: Store, run_id: Any) -> str:
    """Resume the selected run from its newest checkpoint; a message saying so."""
    run = resume_job(store, read_run_id(run_id))
    newest = run_checkpoints(run, store.path)[-1].name
    return f"Resuming run #{run.id} from `{newest}` (pid {run.pid})."


def refresh(store: Store, selected: Any, shown: str | None) -> list[Any]:
    """Everything the timer updates: [table, run dropdown, status, curves, held-out chart, episodes, log, Cancel,
    timer, shown], with gr.skip() for the parts whose content is what the page already shows (`shown` says what
    that is)."""
    refresh_jobs(store)
    rows, choices, live = runs_table(store)
    ids = [value for _, value in choices]
    wanted = _as_id(selected)
    run_id = wanted if wanted in ids else (ids[0] if ids else None)
    view = run_view(store, run_id)
    before = json.loads(shown) if shown else {}
    now = {"rows": rows, "choices": choices, "run": run_id, "view": view.signature, "live": live}
    same = {key: before.get(key) == json.loads(json.dumps(value)) for key, value in now.items()}
    table = gr.skip() if same["rows"] else rows
    dropdown = gr.skip() if same["choices"] and same["run"] else gr.update(choices=choices, value=run_id)
    parts = [gr.skip()] * 5 if same["view"] and same["run"] else \
        [view.status, view.figure, view.heldout, view.episodes, view.log]
    cancel = gr.update(interactive=view.live)  # Cancel acts on a queued or running run only
    timer = gr.skip() if same["live"] else gr.Timer(LIVE_REFRESH_S if live else IDLE_REFRESH_S)
    return [table, dropdown, *parts, cancel, timer, json.dumps(now)]


def _as_id(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _when(moment: Any) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment is not None else ""


def _one_line(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


# --- layout and wiring ----------------------------------------------------------------------------------------


def build_train_tab(ctx: StudioContext, studio: gr.Blocks) -> None:
    """Lay out the Train tab inside the current Blocks and wire its events and refresh timer."""
    store = ctx.store
    tab = Context.block
    gr.Markdown("Train the agent with GRPO on a curriculum. The run goes on in the background (`wmstudio "
                "train-grpo`); its checkpoints, episodes and log live in the studio's `runs/<database>/<id>` folder.")
    with gr.Row(equal_height=True):  # wide enough for a curriculum's whole label ("demo · the five simulated ...")
        curriculum = gr.Dropdown(trainable_curricula(store), value=DEMO_CURRICULUM, label="Curriculum", scale=3,
                                 min_width=360, info="demo, adversarial, or any curriculum saved in Rollouts (a "
                                                     "run plays its scenarios)", elem_id="train-curriculum")
        env = gr.Radio(list(ENVIRONMENTS), value=GRPO_SPECS["env"].default, label="Environment",
                       info=ENVIRONMENT_HELP, scale=3, elem_id="train-env")  # as `wmstudio train-grpo` starts
    with gr.Row(equal_height=True):
        max_steps = gr.Textbox(str(GRPO_SPECS["max_steps"].default), label=f"Max steps (1 to {MAX_STEPS:,})",
                               min_width=120, max_lines=1,
                               elem_id="train-max-steps")
        policy = gr.Textbox("", label="Policy (empty: the shipped agent-small)", min_width=160, max_lines=1,
                            placeholder="a policy folder, or a chat model's hub id", elem_id="train-policy")
        per_step = setting_widget(BATCH_SPECS["scenarios_per_step"], min_width=120, elem_id="train-scenarios-per-step")
        generations = setting_widget(BATCH_SPECS["generations"], min_width=120, elem_id="train-generations")
        start = gr.Button("Start training", variant="primary", min_width=120, elem_id="train-start")
    missing = gr.Markdown(elem_id="train-curriculum-note")  # what a curriculum without scenarios needs
    message = gr.Markdown(elem_id="train-message")
    build_scenarios_panel(store, curriculum, studio)
    table = gr.Dataframe(headers=RUN_COLUMNS, interactive=False, wrap=True, max_height=260, elem_id="train-runs")
    with gr.Row(equal_height=True):
        selected = gr.Dropdown([], label="Run", scale=3, allow_custom_value=True,  # runs other pages started
                               elem_id="train-run")
        cancel = gr.Button("Cancel run", variant="stop", min_width=100, interactive=False, elem_id="train-cancel")
        resume = gr.Button("Resume from checkpoint", min_width=100, elem_id="train-resume")
        refresh_button = gr.Button("Refresh", min_width=80, elem_id="train-refresh")
    status = gr.Markdown(elem_id="train-status")
    curves = gr.Plot(label="Training curves", elem_id="train-curves")
    heldout = gr.Plot(label="Held-out success", elem_id="train-heldout")
    with gr.Accordion("Latest episodes", open=True):
        episodes = gr.Markdown(elem_id="train-episodes", max_height=520)
    with gr.Accordion("Log", open=False):
        log = gr.Textbox(show_label=False, lines=12, max_lines=12, autoscroll=True, elem_id="train-log")
    timer = gr.Timer(IDLE_REFRESH_S)
    shown = gr.State("")

    watched = [table, selected, status, curves, heldout, episodes, log, cancel, timer, shown]

    def on_refresh(run_id: Any, shown_now: str) -> list[Any]:
        try:
            return refresh(store, run_id, shown_now)
        except Exception as err:  # noqa: BLE001 - a failed refresh leaves the page as it was
            failure_markdown(err, "refresh the runs")  # logged with its traceback
            return [gr.skip()] * len(watched)

    def on_start(curriculum_name: Any, env_name: Any, steps: Any, policy_name: Any, scenarios: Any,
                 rollouts: Any) -> list[Any]:
        try:
            run_id, note = start_run(store, curriculum_name, env_name, steps, policy_name, scenarios, rollouts)
        except Exception as err:  # noqa: BLE001 - shown as a message, the form keeps what was typed
            return [failure_markdown(err, "start training", "your settings are kept"), gr.skip()]
        _, choices, _ = runs_table(store)
        return [note, gr.update(choices=choices, value=run_id)]

    def on_action(action, doing: str):
        def handler(run_id: Any) -> str:
            try:
                return action(store, run_id)
            except Exception as err:  # noqa: BLE001
                return failure_markdown(err, doing, KEPT)
        return handler

    now = {"fn": on_refresh, "inputs": [selected, shown], "outputs": watched, "api_visibility": "private",
           "show_progress": "hidden"}
    form = [curriculum, env, max_steps, policy, per_step, generations]
    start.click(on_start, form, [message, selected], api_name="train_start").then(**now)
    max_steps.submit(on_start, form, [message, selected], api_visibility="private").then(**now)
    cancel.click(on_action(cancel_run, "cancel the run"), selected, message, api_name="train_cancel").then(**now)
    resume.click(on_action(resume_run, "resume the run"), selected, message, api_name="train_resume").then(**now)
    refresh_button.click(**now)
    selected.input(**now)
    def on_pick(evt: gr.SelectData) -> Any:
        return int(evt.row_value[0]) if evt.row_value else gr.skip()

    table.select(on_pick, None, selected, api_visibility="private").then(**now)
    timer.tick(**now, concurrency_limit=2, concurrency_id="train-refresh")
    studio.load(**now)
    def on_curricula() -> Any:  # a curriculum saved in Rollouts since the page was opened is offered too
        return gr.update(choices=trainable_curricula(store))

    def on_curriculum(name: Any) -> str:
        try:
            return missing_scenarios(store, name)
        except Exception as err:  # noqa: BLE001 - e.g. a name no longer saved
            return failure_markdown(err, "read the curriculum", KEPT)

    studio.load(on_curricula, None, curriculum, api_visibility="private")
    if isinstance(tab, gr.Tab):  # the studio builds this tab inside a gr.Tab: re-read the curricula when opened
        tab.select(on_curricula, None, curriculum, api_visibility="private")
    curriculum.change(on_curriculum, curriculum, missing, api_visibility="private")
