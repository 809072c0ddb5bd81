"""Drawing a denoising run: the canvas of any frame as coloured tokens, and the decode-order heatmap.

Tokens are coloured by category (masked, anchor, new this step, earlier) and shaded by the confidence they
were committed with; the HTML is small (classes, no inline styles) because it is re-sent for every frame."""

from __future__ import annotations

import html
from collections.abc import Sequence

import plotly.graph_objects as go

from wmstudio.model.canvas.canvas import WRITERS, Canvas
from wmstudio.model.denoising.sampler import Frame
from wmstudio.model.denoising.trace import Commit, DecodeTrace

SHADES = 5  # confidence buckets: class c0 (< 0.2) .. c4 (>= 0.8)

CANVAS_CSS = """
.wm-legend { font-size: 0.85em; margin-bottom: 6px; color: var(--body-text-color-subdued); }
.wm-legend span { margin-right: 12px; }
.wm-samples { display: flex; gap: 12px; flex-wrap: wrap; align-items: flex-start; }
.wm-sample { flex: 1 1 320px; min-width: 0; }
.wm-head { font-size: 0.85em; font-weight: 600; margin-bottom: 4px; }
.wm-tokens { font-family: var(--font-mono), monospace; font-size: 0.9em; line-height: 1.9;
  white-space: pre-wrap; word-break: break-all; padding: 8px; border-radius: 6px;
  border: 1px solid var(--border-color-primary); background: var(--background-fill-secondary); }
.wm-tokens b, .wm-tokens i, .wm-tokens u, .wm-legend b, .wm-legend i, .wm-legend u
  { font-weight: normal; font-style: normal; text-decoration: none; border-radius: 3px; padding: 1px 0; }
.wm-tokens i, .wm-legend i { display: inline-block; width: 0.75em; height: 1.05em; vertical-align: middle;
  margin: 0 1px; background: #9ca3af; opacity: 0.45; }
.wm-tokens u, .wm-legend u { color: #1d4ed8; background: rgba(59, 130, 246, 0.12); }
.wm-tokens b.p { color: #6b7280; }
.wm-tokens b.n, .wm-legend b.n { outline: 1px solid #c2410c; }
.wm-tokens b.n.c0 { background: rgba(249, 115, 22, 0.15); } .wm-tokens b.n.c1 { background: rgba(249, 115, 22, 0.3); }
.wm-tokens b.n.c2 { background: rgba(249, 115, 22, 0.45); } .wm-tokens b.n.c3 { background: rgba(249, 115, 22, 0.6); }
.wm-tokens b.n.c4, .wm-legend b.n { background: rgba(249, 115, 22, 0.8); }
.wm-tokens b.e.c0 { background: rgba(34, 197, 94, 0.1); } .wm-tokens b.e.c1 { background: rgba(34, 197, 94, 0.2); }
.wm-tokens b.e.c2 { background: rgba(34, 197, 94, 0.3); } .wm-tokens b.e.c3 { background: rgba(34, 197, 94, 0.42); }
.wm-tokens b.e.c4, .wm-legend b.e { background: rgba(34, 197, 94, 0.55); }
.wm-tokens b.k, .wm-legend b.k { box-shadow: inset 0 -3px 0 #7c3aed; }
.wm-tokens u.w-state, .wm-legend u.w-state { color: #0f766e; background: rgba(20, 184, 166, 0.16); }
.wm-tokens u.w-call, .wm-legend u.w-call { color: #334155; background: rgba(100, 116, 139, 0.18); }
.wm-tokens u.w-episode, .wm-legend u.w-episode { color: #92400e; background: rgba(245, 158, 11, 0.2); }
.wm-tokens u.w-outcome, .wm-legend u.w-outcome { color: #9d174d; background: rgba(236, 72, 153, 0.16); }
.wm-tokens u.w-rule, .wm-legend u.w-rule { color: #5b21b6; background: rgba(139, 92, 246, 0.16); }
.wm-written { font-size: 0.85em; margin-bottom: 6px; }
"""
LEGEND = ('<div class="wm-legend"><span><i></i> masked</span><span><u>layout and your pins</u></span>'
          + "".join(f'<span><u class="w-{key}">{html.escape(text)}</u></span>' for key, text in WRITERS.items())
          + '<span>the model: <b class="n">new this step</b></span><span><b class="e">earlier</b></span>'
          '<span><b class="e k">copied from the prompt by its copy head</b></span>'
          '<span>darker = more confident · ␣ = padding (dropped)</span></div>')


def canvas_html(canvas: Canvas, frames: Sequence[Frame], index: int | None, traces: Sequence[DecodeTrace],
                steps_hint: int | None = None, done: bool = False) -> str:
    """The canvas after frame `index` (None: before the first step) for every sample, side by side.

    The root carries `data-step` (the frame shown, -1 before any), `data-done` and `data-masked` (masks left in
    all samples) so a browser test or benchmark can tell frames apart without reading the tokens."""
    samples = len(frames[0].tokens) if frames else max(1, len(traces))
    shown = -1 if index is None or not frames else max(0, min(index, len(frames) - 1))
    columns, masked_total = [], 0
    for sample in range(samples):
        tokens = frames[shown].tokens[sample] if shown >= 0 else list(canvas.tokens)
        committed = traces[sample].by_position() if sample < len(traces) else {}
        body, masked = _tokens_html(canvas, tokens, committed, shown)
        masked_total += masked
        of = f" of {len(frames)}" if done else (f" of ~{steps_hint}" if steps_hint else "")
        where = "before the first step" if shown < 0 else f"step {shown + 1}{of}"
        head = f"{'Sample ' + str(sample + 1) + ' · ' if samples > 1 else ''}{where} · {masked} masked left"
        columns.append(f'<div class="wm-sample"><div class="wm-head">{head}</div>'
                       f'<div class="wm-tokens">{body}</div></div>')
    return (f'<div class="wm-canvas" data-step="{shown}" data-done="{int(done)}" data-masked="{masked_total}">'
            f'{LEGEND}{written_summary(canvas)}<div class="wm-samples">{"".join(columns)}</div></div>')


def written_summary(canvas: Canvas) -> str:
    """One line saying who wrote how much of the canvas before the model's first step, and what it leaves."""
    counts: dict[str, int] = {}
    for position, who in canvas.written_by.items():
        if canvas.tokens[position] != canvas.pad_id:
            counts[who] = counts.get(who, 0) + 1
    left = len(canvas.masked_positions)
    if not counts:
        return f'<div class="wm-written">The model writes every masked token ({left}).</div>'
    said = " · ".join(f'<u class="w-{who}">{html.escape(WRITERS.get(who, who))}</u> {count}'
                      for who, count in counts.items())
    if not left:
        return (f'<div class="wm-written">Written before the model, in tokens: {said}; every slot is decided, so no '
                'denoising step is left (Model only shows what the model writes alone).</div>')
    return (f'<div class="wm-written">Written before the model, in tokens: {said}; the model writes the '
            f'{left} masked token(s) left.</div>')


def _tokens_html(canvas: Canvas, tokens: Sequence[int], committed: dict[int, Commit],
                 shown: int) -> tuple[str, int]:
    parts: list[str] = []
    anchor_run: list[str] = []
    run_by: str | None = None
    masked = 0

    def close_run() -> None:
        if anchor_run:
            label = f' class="w-{run_by}" title="{html.escape(WRITERS.get(run_by, run_by))}"' if run_by else ""
            parts.append(f"<u{label}>{html.escape(''.join(anchor_run))}</u>")
            anchor_run.clear()

    for position, token in enumerate(tokens):
        if canvas.span_of[position] < 0:
            who = canvas.written_by.get(position)
            if who != run_by:
                close_run()
                run_by = who
            if not (who and token == canvas.pad_id):  # a helper's padding is no text
                anchor_run.append(canvas.piece(token))
            continue
        close_run()
        run_by = None
        made = committed.get(position)
        if made is None or made.step > shown or token == canvas.mask_id:
            parts.append("<i></i>")
            masked += 1
            continue
        category = ("n" if made.step == shown else "e") + (" k" if made.copied else "")
        shade = min(SHADES - 1, max(0, int(made.confidence * SHADES)))
        if token == canvas.pad_id:
            parts.append(f'<b class="{category} c{shade} p">␣</b>')
        elif token == canvas.end_id:  # an array ends here: the items after it are cut from the response
            parts.append(f'<b class="{category} c{shade} p" title="the array ends here">⊣</b>')
        else:
            parts.append(f'<b class="{category} c{shade}">{html.escape(canvas.piece(token))}</b>')
    close_run()
    return "".join(parts), masked


def heatmap_figure(canvas: Canvas, frames: Sequence[Frame], sample: int = 0) -> go.Figure:
    """Decode order and confidence of one sample: a cell per (canvas position, step) where a token was committed,
    coloured by its confidence; anchors stay blank. Hover shows the token."""
    samples = len(frames[0].unmasked) if frames else 1
    committed = DecodeTrace.of_frames(frames, sample).by_position()
    final = frames[-1].tokens[sample] if frames else list(canvas.tokens)
    steps = max(1, len(frames))
    z: list[list[float | None]] = [[None] * len(canvas) for _ in range(steps)]
    text: list[list[str]] = [[""] * len(canvas) for _ in range(steps)]
    for position, commit in committed.items():
        if position < len(canvas):
            z[commit.step][position] = round(commit.confidence, 4)
            piece = {canvas.pad_id: "␣ (pad)", canvas.end_id: "⊣ (the array ends)"}.get(
                final[position], canvas.piece(final[position]))
            text[commit.step][position] = html.escape(piece)
    figure = go.Figure(go.Heatmap(
        z=z, x=list(range(len(canvas))), y=list(range(1, steps + 1)), text=text, zmin=0, zmax=1,
        colorscale="Viridis", colorbar={"title": "confidence"}, hoverongaps=False,
        hovertemplate="position %{x}, step %{y}<br>token %{text}<br>confidence %{z:.2f}<extra></extra>",
    ))
    figure.update_layout(
        title=f"Decode order and confidence{f' (sample {sample + 1})' if samples > 1 else ''}",
        xaxis_title="canvas position", yaxis_title="step", yaxis_autorange="reversed",
        height=max(260, min(520, 120 + 16 * steps)), margin={"l": 50, "r": 20, "t": 50, "b": 45},
    )
    return figure
