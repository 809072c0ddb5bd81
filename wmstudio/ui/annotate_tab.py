"""The Annotate tab: rate unrated steps blind (1-5 realism, outcome correctness, training utility, failure tags,
a note) with keyboard shortcuts, see your progress and the annotators' agreement (Krippendorff's alpha, ordinal).

Handlers are plain functions of the form values plus who is signed in; the store does the queueing, so two
annotators in two browsers overlap the way `next_to_annotate` spreads the work."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import gradio as gr
import plotly.graph_objects as go

from wmstudio.metrics.agreement import AgreementReport
from wmstudio.problems import InvalidInput
from wmstudio.studio.annotation import (
    DEFAULT_OVERLAP,
    FAILURE_TAGS,
    RATING_DIMENSIONS,
    AnnotationItem,
    Store,
    annotator_progress,
    current_agreement,
    get_annotator,
    next_to_annotate,
    save_rating,
    skip_step,
)
from wmstudio.studio.context import StudioContext
from wmstudio.studio.worlds import get_world
from wmstudio.ui.check_view import pretty_response
from wmstudio.ui.identity import (
    NAME_STORAGE_KEY,
    Identity,
    profile_username,
    request_username,
    resolve_identity,
    sign_in_mode,
)
from wmstudio.ui.messages import failure_markdown
from wmstudio.world.spec import WorldSpec

LABELS = {"realism": "Realism", "outcome_correctness": "Outcome correctness", "training_utility": "Training utility"}
SCALE_HELP = {
    "realism": "1 = obviously made up · 5 = indistinguishable from a real API",
    "outcome_correctness": "1 = wrong outcome for this call, state and rules · 5 = exactly what should happen",
    "training_utility": "1 = would teach an agent the wrong thing · 5 = a valuable training example",
}
SCORES = [1, 2, 3, 4, 5]
MAX_HISTORY_SHOWN = 6
MAX_CHARS_SHOWN = 6000
KEPT = "nothing was saved, your answers are kept"
SHORTCUT_LEGEND = ("**Keys** — `1`–`5` score the highlighted question, then move to the next · `↑` `↓` choose "
                   "the question · `Enter` submit · `S` skip. Keys do nothing while you type in a text box.")

# Passed by the studio to `launch(js=...)` (or as a <script> via `head=`): Gradio 6 takes page scripts there.
ANNOTATE_SHORTCUTS_JS = """
() => {
  if (window.__wmAnnotateKeys) return;
  window.__wmAnnotateKeys = true;
  const questions = ["rate-realism", "rate-outcome_correctness", "rate-training_utility"];
  let active = 0;
  const shown = (el) => !!el && el.offsetParent !== null;
  const typing = (el) => !!el && (el.isContentEditable || el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
    (el.tagName === "INPUT" && !["radio", "checkbox", "button", "submit"].includes(el.type)));
  const mark = () => questions.forEach((id, i) => {
    const el = document.getElementById(id);
    if (!el) return;
    el.style.outline = i === active ? "2px solid var(--color-accent, #f97316)" : "";
    el.style.outlineOffset = "-2px";
    el.style.borderRadius = "8px";
  });
  const choose = (key) => {
    const root = document.getElementById(questions[active]);
    if (!root) return false;
    const label = [...root.querySelectorAll("label")].find((l) => l.textContent.trim() === key);
    const input = label && label.querySelector("input");
    if (!input) return false;
    input.click();
    return true;
  };
  document.addEventListener("focusin", (e) => {
    const i = questions.findIndex((id) => e.target.closest && e.target.closest("#" + id));
    if (i >= 0) { active = i; mark(); }
  });
  document.addEventListener("click", (e) => {
    const i = questions.findIndex((id) => e.target.closest && e.target.closest("#" + id));
    if (i >= 0) active = i;
    if (e.target.closest && e.target.closest("#annotate-submit, #annotate-skip, #annotate-start")) {
      active = 0;  // and let Enter mean "submit" next, not "press the clicked button again"
      setTimeout(() => document.activeElement && document.activeElement.blur && document.activeElement.blur(), 0);
    }
    setTimeout(mark, 50);
  });
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey || e.isComposing) return;
    if (!shown(document.getElementById("annotate-panel")) || typing(e.target)) return;
    if (e.key >= "1" && e.key <= "5") {
      if (choose(e.key)) { active = Math.min(active + 1, questions.length - 1); e.preventDefault(); }
    } else if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      active = (active + (e.key === "ArrowDown" ? 1 : questions.length - 1)) % questions.length;
      e.preventDefault();
    } else if (e.key === "Enter" && e.target.tagName !== "BUTTON") {
      document.querySelector("#annotate-submit")?.click(); active = 0; e.preventDefault();
    } else if (e.key === "s" || e.key === "S") {
      document.querySelector("#annotate-skip")?.click(); active = 0; e.preventDefault();
    } else {
      return;
    }
    mark();
  });
  mark();
}
"""
ANNOTATE_SHORTCUTS_HEAD = f"<script>({ANNOTATE_SHORTCUTS_JS.strip()})();</script>"


@dataclass
class ItemView:
    """What the page shows of one step to rate: its id, the world context, the environment state, call + response."""

    step_id: int | None
    context: str
    state: str
    exchange: str


# --- rendering ------------------------------------------------------------------------------------------------


def code_block(text: str, language: str = "") -> str:
    """A fenced Markdown code block that a ``` inside `text` cannot break, cut at MAX_CHARS_SHOWN."""
    if len(text) > MAX_CHARS_SHOWN:
        text = text[:MAX_CHARS_SHOWN] + f"\n… ({len(text) - MAX_CHARS_SHOWN:,} more characters)"
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def item_view(item: AnnotationItem, world: WorldSpec) -> ItemView:
    """Render one queue item blind: world task, rules and history; the call; the response. No model, no maker."""
    lines = [f"**World:** {world.name} · step {item.step_index + 1} of its rollout", "", "**Task.** " + (world.task or "—")]
    if world.rules:
        lines += ["", "**Rules**"] + [f"{i}. {rule.text}" for i, rule in enumerate(world.rules, start=1)]
    if item.history:
        shown = item.history[-MAX_HISTORY_SHOWN:]
        lines += ["", f"**Earlier steps** ({len(item.history)})"]
        if len(item.history) > len(shown):
            lines.append(f"_… {len(item.history) - len(shown)} earlier steps not shown_")
        for number, step in enumerate(shown, start=len(item.history) - len(shown) + 1):
            response = step.response if isinstance(step.response, str) else json.dumps(step.response)
            lines.append(f"{number}. **{step.call.name}** `{_one_line(step.call.arguments, 200)}`  \n"
                         f"→ `{_one_line(response, 300)}`")
    else:
        lines += ["", "_This is the first step of its rollout._"]
    state = world.initial_state
    state_text = state if isinstance(state, str) else json.dumps(state, indent=2, ensure_ascii=False)
    response, is_json = pretty_response(item.response)
    exchange = "\n\n".join([
        "**The call**",
        code_block(json.dumps(item.call.to_json(), indent=2, ensure_ascii=False), "json"),
        "**The response to rate**",
        code_block(response, "json" if is_json else ""),
    ])
    return ItemView(item.step_id, "\n".join(lines), code_block(state_text, "json"), exchange)


def _one_line(value: Any, limit: int) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = " ".join(text.split()).replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"


EMPTY_VIEW = ItemView(None, "**Nothing left to rate.** Every step has your rating or your skip; new steps "
                            "appear here as rollouts are made.", "", "")


def agreement_markdown(report: AgreementReport) -> str:
    """The agreement table: alpha per dimension (or why there is none yet) and how many ratings it rests on."""
    if report.units == 0:
        return "**Agreement** — no ratings yet. Alpha appears once two annotators rate the same steps."
    rows = ["| Dimension | α (ordinal) | Ratings | Steps rated twice or more |", "|---|---|---|---|"]
    for entry in report.dimensions:
        alpha = f"**{entry.alpha:.3f}**" if entry.alpha is not None else "—"
        rows.append(f"| {LABELS.get(entry.dimension, entry.dimension)} | {alpha} | {entry.ratings} | "
                    f"{entry.pairable_units} |")
    head = (f"**Agreement** — Krippendorff's alpha, ordinal level, over {report.units} rated steps by "
            f"{report.annotators} annotator(s). 1 = perfect agreement, 0 = chance.")
    notes = dict.fromkeys(entry.note for entry in report.dimensions if entry.alpha is None)
    why = "".join(f"\n\n_— {note}_" for note in notes)
    return head + "\n\n" + "\n".join(rows) + why


def distribution_figure(report: AgreementReport) -> go.Figure:
    """Grouped bars: how often each score 1-5 was given, per dimension."""
    figure = go.Figure()
    for entry in report.dimensions:
        figure.add_bar(name=LABELS.get(entry.dimension, entry.dimension), x=[str(s) for s in SCORES],
                       y=[entry.distribution.get(s, 0) for s in SCORES])
    figure.update_layout(barmode="group", title="Rating distributions", xaxis_title="score",
                         yaxis_title="ratings", height=320, margin={"l": 40, "r": 10, "t": 40, "b": 40},
                         legend={"orientation": "h", "y": -0.25})
    return figure


def progress_markdown(store: Store, identity: Identity) -> str:
    """Your own count: rated and skipped out of all steps there are to rate."""
    annotator = get_annotator(store, identity.name, identity.source)
    progress = annotator_progress(store, annotator.id)
    return (f"**{identity.name}**: rated **{progress.rated}** of {progress.total} · skipped {progress.skipped} · "
            f"{progress.remaining} to go")

ITEM_HEIGHT = 420  # pixels of the step's context and of its exchange before they scroll


# --- handlers: plain functions of form values and who is signed in -------------------------------------------


def _identity(ctx: StudioContext, typed_name: Any, request: Any, profile: Any) -> Identity:
    return resolve_identity(typed_name, request_username(request), profile_username(profile), ctx.users)


def next_item(store: Store, identity: Identity, overlap: int = DEFAULT_OVERLAP) -> ItemView:
    """The next step this annotator should rate, rendered blind (EMPTY_VIEW when the queue is done)."""
    annotator = get_annotator(store, identity.name, identity.source)
    item = next_to_annotate(store, annotator.id, overlap)
    if item is None:
        return EMPTY_VIEW
    return item_view(item, get_world(store, item.world_id).spec())


def _item_outputs(view: ItemView) -> list[Any]:
    """Values for the item components: the step and its context, with the answers cleared for a fresh rating."""
    return [view.step_id, view.context, view.state, view.exchange, None, None, None, [], ""]


def start_rating(ctx: StudioContext, typed_name: Any, request: Any = None, profile: Any = None) -> list[Any]:
    """Sign in (or confirm who is signed in) and show the first item and your progress (agreement: refresh_agreement)."""
    try:
        identity = _identity(ctx, typed_name, request, profile)
        view = next_item(ctx.store, identity, ctx.overlap)
        progress = progress_markdown(ctx.store, identity)
    except Exception as err:  # noqa: BLE001 - shown as a message, the page keeps what was typed
        return [gr.skip(), gr.skip()] + [gr.skip()] * 9 + [failure_markdown(err, 'start rating', KEPT), gr.skip()]
    saved = identity.name if identity.source == "local" else gr.skip()
    return [saved, identity.describe()] + _item_outputs(view) + ["", progress]


def submit_rating(ctx: StudioContext, typed_name: Any, step_id: Any, realism: Any, outcome_correctness: Any,
                  training_utility: Any, failure_tags: Any, note: Any, request: Any = None,
                  profile: Any = None) -> list[Any]:
    """Save the three scores, tags and note for the shown step, then show the next item and your progress.

    A missing score or a missing item is reported and everything typed stays on the page."""
    try:
        identity = _identity(ctx, typed_name, request, profile)
        if step_id is None:
            raise InvalidInput("no step is shown: press Start (or reload) to get the next step to rate")
        scores = {"realism": realism, "outcome_correctness": outcome_correctness, "training_utility": training_utility}
        missing = [LABELS[name] for name, value in scores.items() if value in (None, "")]
        if missing:
            raise InvalidInput(f"give a score from 1 to 5 for {', '.join(missing)} (keys 1-5, or click)")
        annotator = get_annotator(ctx.store, identity.name, identity.source)
        save_rating(ctx.store, annotator.id, int(step_id), **{k: _score(v) for k, v in scores.items()},
                    failure_tags=list(failure_tags or []), note=note or "")
        return _after_action(ctx, identity, "Saved your rating of that step.")
    except Exception as err:  # noqa: BLE001 - shown as a message, the answers stay on the page
        return [gr.skip()] * 9 + [failure_markdown(err, 'save the rating', KEPT), gr.skip()]


def skip_item(ctx: StudioContext, typed_name: Any, step_id: Any, request: Any = None, profile: Any = None) -> list[Any]:
    """Leave the shown step to others and show the next one."""
    try:
        identity = _identity(ctx, typed_name, request, profile)
        if step_id is None:
            raise InvalidInput("no step is shown: press Start (or reload) to get the next step to rate")
        annotator = get_annotator(ctx.store, identity.name, identity.source)
        skip_step(ctx.store, annotator.id, int(step_id))
        return _after_action(ctx, identity, "Skipped that step.")
    except Exception as err:  # noqa: BLE001
        return [gr.skip()] * 9 + [failure_markdown(err, 'skip', KEPT), gr.skip()]


def _after_action(ctx: StudioContext, identity: Identity, message: str) -> list[Any]:
    view = next_item(ctx.store, identity, ctx.overlap)
    return _item_outputs(view) + [message, progress_markdown(ctx.store, identity)]


def refresh_agreement(ctx: StudioContext, max_age_s: float = 0.0) -> tuple[str, go.Figure | Any]:
    """The agreement table and distribution chart (see `studio.annotation.current_agreement`)."""
    try:
        report = current_agreement(ctx.store, max_age_s)
    except Exception as err:  # noqa: BLE001
        return failure_markdown(err, "compute the agreement", KEPT), gr.skip()
    return agreement_markdown(report), distribution_figure(report)


def _score(value: Any) -> Any:
    """A radio value as a whole number when it is one ("4" -> 4); anything else goes on for save_rating to name."""
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return value


# --- layout and wiring ----------------------------------------------------------------------------------------


def build_annotate_tab(ctx: StudioContext, studio: gr.Blocks) -> None:
    """Lay out the Annotate tab inside the current Blocks and wire its events (keyboard: ANNOTATE_SHORTCUTS_JS)."""
    mode = sign_in_mode(ctx.users)
    saved_name = gr.BrowserState("", storage_key=NAME_STORAGE_KEY)
    with gr.Column(elem_id="annotate-panel"):
        with gr.Row(equal_height=True):
            if mode == "hf":
                gr.LoginButton(scale=1)
            name = gr.Textbox(label="Your name", placeholder="e.g. ada (kept in this browser)", scale=3,
                              visible=mode == "local", elem_id="annotate-name", max_length=100)
            start = gr.Button("Start rating", variant="secondary", scale=1, elem_id="annotate-start")
            identity_md = gr.Markdown(elem_id="annotate-identity")
        progress_md = gr.Markdown(elem_id="annotate-progress")
        step_id = gr.Number(visible=False, precision=0, label="step id")
        with gr.Row():  # the context and the exchange scroll in boxes, so the scores stay in view at 1000 px
            with gr.Column(scale=5):
                context_md = gr.Markdown("Press **Start rating** to get the first step.", elem_id="annotate-context",
                                         max_height=ITEM_HEIGHT)
                with gr.Accordion("Initial environment state", open=False):
                    state_md = gr.Markdown(max_height=ITEM_HEIGHT)
            with gr.Column(scale=6):
                exchange_md = gr.Markdown(elem_id="annotate-exchange", max_height=ITEM_HEIGHT)
        with gr.Row():
            radios = [
                gr.Radio(SCORES, label=LABELS[d], info=SCALE_HELP[d], elem_id=f"rate-{d}") for d in RATING_DIMENSIONS
            ]
        with gr.Row():
            tags = gr.CheckboxGroup(list(FAILURE_TAGS), label="Failure tags", scale=3, elem_id="annotate-tags")
            note = gr.Textbox(label="Note (optional)", lines=2, scale=2, elem_id="annotate-note")
        with gr.Row():
            submit = gr.Button("Submit rating (Enter)", variant="primary", elem_id="annotate-submit")
            skip = gr.Button("Skip (S)", elem_id="annotate-skip")
        gr.Markdown(SHORTCUT_LEGEND, elem_id="annotate-legend")
        message = gr.Markdown(elem_id="annotate-message")
        with gr.Accordion("Agreement between annotators", open=True):
            agreement_md = gr.Markdown(elem_id="annotate-agreement")
            agreement_plot = gr.Plot(label="Rating distributions", elem_id="annotate-distribution")
            refresh = gr.Button("Refresh agreement", size="sm")

    item = [step_id, context_md, state_md, exchange_md, *radios, tags, note]
    after = [message, progress_md]
    chart = [agreement_md, agreement_plot]

    def on_start(typed_name: str, request: gr.Request, profile: gr.OAuthProfile | None):
        return start_rating(ctx, typed_name, request, profile)

    def on_submit(typed_name: str, shown_step: float | None, realism: Any, outcome: Any, utility: Any,
                  failure_tags: list[str], note_text: str, request: gr.Request, profile: gr.OAuthProfile | None):
        return submit_rating(ctx, typed_name, shown_step, realism, outcome, utility, failure_tags, note_text,
                             request, profile)

    def on_skip(typed_name: str, shown_step: float | None, request: gr.Request, profile: gr.OAuthProfile | None):
        return skip_item(ctx, typed_name, shown_step, request, profile)

    def on_open(stored_name: str, request: gr.Request, profile: gr.OAuthProfile | None):
        """Page load: put back the name kept in this browser and, when someone is known, the first item."""
        if mode == "local" and not (stored_name or "").strip():
            return [gr.skip()] * (len(start_outputs) - 1) + ["Type your name and press **Start rating**.", gr.skip()]
        return [stored_name or ""] + start_rating(ctx, stored_name, request, profile)

    def on_restore(stored_name: str, typed_name: str, request: gr.Request, profile: gr.OAuthProfile | None):
        """The kept name arrives when the tab is first shown (Gradio mounts a tab's components lazily)."""
        if not (stored_name or "").strip() or (stored_name or "").strip() == (typed_name or "").strip():
            return [gr.skip()] * (1 + len(start_outputs))
        return on_open(stored_name, request, profile)

    def after_rating():
        return refresh_agreement(ctx)

    def on_page():
        return refresh_agreement(ctx, max_age_s=30.0)

    start_outputs = [saved_name, identity_md, *item, *after]
    # The next item comes first; the agreement view follows in its own event, one computation at a time.
    queue_once = {"concurrency_limit": 1, "concurrency_id": "annotate-agreement", "show_progress": "hidden",
                  "api_visibility": "private"}
    start.click(on_start, name, start_outputs, api_name="annotate_start").then(on_page, None, chart, **queue_once)
    name.submit(on_start, name, start_outputs, api_visibility="private").then(on_page, None, chart, **queue_once)
    submit.click(on_submit, [name, step_id, *radios, tags, note], [*item, *after], api_name="annotate_submit").then(
        after_rating, None, chart, **queue_once)
    skip.click(on_skip, [name, step_id], [*item, *after], api_name="annotate_skip")
    refresh.click(after_rating, None, chart, api_name="annotate_agreement", concurrency_limit=1,
                  concurrency_id="annotate-agreement")
    studio.load(on_open, saved_name, [name, *start_outputs], api_visibility="private")
    studio.load(on_page, None, chart, **queue_once)
    saved_name.change(on_restore, [saved_name, name], [name, *start_outputs], api_visibility="private")
