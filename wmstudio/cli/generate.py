"""The engine from a terminal: `generate` (a live view of the denoising, or --json) and `bench denoise` (our sampler
against LLaDA's reference loop). `generate`'s sampler options are SamplerSettings' fields, as in the studio."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from wmstudio.cli.common import ANCHOR_HELP, HISTORY_HELP, PRESET_HELP, emit, fail, load_world, read_call, read_history
from wmstudio.cli.options import settings_from_options, with_settings
from wmstudio.locations import DEFAULT_MODEL
from wmstudio.model.denoising.sampler_settings import SamplerSettings
from wmstudio.problems import InvalidInput

commands = typer.Typer()
bench_app = typer.Typer(help="Measure how fast the engine runs on this machine.", no_args_is_help=True)


@commands.command("generate")
@with_settings(SamplerSettings)
def generate_cmd(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    anchor: list[str] = typer.Option([], "--anchor", help=ANCHOR_HELP),
    model: Optional[str] = typer.Option(None, "--model", help="Model folder or hub id (default: the shipped MDLM)."),
    history: Optional[Path] = typer.Option(None, "--history", help=HISTORY_HELP),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow LLaDA/Dream model code."),
    approximate_cache: bool = typer.Option(
        False, "--approximate-cache", help="Cache the prompt of a fully bidirectional model (inexact, faster)."
    ),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or mps (default: the best there is)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the live view."),
    preset: Optional[str] = typer.Option(None, "--preset", help=PRESET_HELP + " Its anchors join --anchor (which "
                                         "wins on the same field), its directives the world's."),
    settings: dict[str, Any] = None,
) -> None:
    """Generate the response to a call with the world model: a live view of the denoising, or --json."""
    from wmstudio.world.steering.anchors import parse_anchors

    # the input first: a mistake in it is named before CEL (a second), torch and the model (seconds) load
    anchors = parse_anchors(anchor)
    spec = load_world(world)
    the_call = read_call(call)
    if preset is not None:
        from wmstudio.world.steering.presets import apply_preset

        spec, anchors = apply_preset(preset, spec, the_call, anchors)
        typer.echo(f"preset {preset}: anchors {', '.join(map(str, anchors)) or 'none'}; directives "
                   f"{'; '.join(spec.directives)}", err=True)
    steps_before = read_history(history)
    sampler = settings_from_options(SamplerSettings, settings)
    from wmstudio.model.generation.generation import Generation, generate_stream
    from wmstudio.model.serving.backends import load_backend  # torch and transformers: only once the input is read

    try:
        backend = load_backend(model or DEFAULT_MODEL, trust_remote_code=trust_remote_code, device=device,
                               approximate_cache=approximate_cache)
        stream = generate_stream(backend, spec, the_call, anchors, steps_before, sampler)
        result = _run_generation(stream, live=not as_json)
    except OSError as err:  # unreadable weights or tokenizer files
        fail(f"cannot load the model: {err}")
    assert isinstance(result, Generation)
    if as_json:
        emit({**result.to_json(), "directives": list(spec.directives)})
        return
    for k, sample in enumerate(result.samples):
        verdict = "ok" if sample.checks.ok else "; ".join(_check_problems(sample.checks)) or "failed"
        typer.echo(f"--- sample {k + 1} ({sample.steps} steps): {verdict}")
        typer.echo(sample.response)
    if result.outcome is not None:
        typer.echo(f"outcome head {result.outcome_summary()} (written into its slots; --no-outcome-head lets the "
                   "canvas decide)", err=True)
    if result.sketch is not None:
        used = "its skeleton was laid out from it" if result.schema_from == "sketch" else "not a schema: free canvas"
        typer.echo(f"the tool has no response schema; the model sketched it as {result.sketch.text} ({used})", err=True)
    elif result.schema_from == "history":
        typer.echo("the tool has no response schema; its skeleton comes from its earlier answers in the history",
                   err=True)
    elif result.schema_from == "training":
        typer.echo("the tool has no response schema; its skeleton is the one the model was trained with for it",
                   err=True)
    typer.echo(f"{result.model}, {result.mode} canvas, grounding {result.grounding}, {result.elapsed_ms:.0f} ms",
               err=True)


def _run_generation(stream, live: bool):
    """Drain `stream`; with `live`, redraw the first sample's canvas in the terminal at every frame."""
    from wmstudio.model.generation.generation import Generation

    if not live:
        return next(item for item in stream if isinstance(item, Generation))
    from rich.console import Console
    from rich.live import Live

    canvas = next(stream)
    if isinstance(canvas, Generation):  # the AR baseline has no canvas and no frames
        return canvas
    with Live(_canvas_text(canvas), console=Console(stderr=True), refresh_per_second=20) as view:
        for item in stream:
            if isinstance(item, Generation):
                return item
            view.update(_frame_text(canvas, item))
    raise InvalidInput("generation ended without a result")


def _canvas_text(canvas, tokens=None, fresh=frozenset()):
    """A canvas in the terminal: anchors plain, masked slots a dim block, pads a dim dot, new slots highlighted."""
    from rich.text import Text

    text = Text()
    for position, token in enumerate(tokens if tokens is not None else canvas.tokens):
        if canvas.span_of[position] < 0:
            text.append(canvas.piece(token))
        elif token == canvas.mask_id:
            text.append("\u2591", style="dim")
        elif token == canvas.pad_id:
            text.append("\u00b7", style="dim")
        else:
            text.append(canvas.piece(token), style="bold black on green" if position in fresh else "bold")
    return text


def _frame_text(canvas, frame):
    """Sample 1 of a frame, with a line saying the step and how many slots it unmasked."""
    text = _canvas_text(canvas, frame.tokens[0], set(frame.unmasked[0]))
    text.append(f"\n step {frame.step + 1}: {len(frame.unmasked[0])} unmasked", style="dim")
    return text


def _check_problems(report) -> list[str]:
    problems = [] if report.json_valid else ["not JSON"]
    problems += report.schema_errors + report.anchor_violations
    problems += [f"rule: {v['rule']} ({v['message']})" for v in report.rule_violations]
    return problems + report.message_strays + report.invented


@bench_app.command("denoise")
def bench_denoise_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: the best there is)."),
    preset: str = typer.Option("default", "--preset", help="default (shipped model) or llada-8b (random, GPU)."),
    repeats: int = typer.Option(5, "--repeats", min=1, max=100,
                                help="Timed runs per configuration, each on another prompt."),
    model: Optional[str] = typer.Option(None, "--model", help="Time this wmstudio MDLM instead of the default."),
    workload: Optional[str] = typer.Option(None, "--workload", help="random (random prompts: the worst case) or "
                                                                    "real (held-out calls of the demo worlds); "
                                                                    "default both."),
    prompt_tokens: list[int] = typer.Option([400, 1024], "--prompt-tokens", min=16,
                                            help="Prompt lengths to time (repeat the option: --prompt-tokens 2048)."),
    canvas_tokens: list[int] = typer.Option([32, 64, 128], "--canvas-tokens", min=4,
                                            help="Canvas lengths to time (repeat the option: --canvas-tokens 80)."),
) -> None:
    """Time our sampler against LLaDA's reference loop for canvases of 32/64/128 and prompts of ~400/1024 (or the
    lengths given)."""
    from wmstudio.model.generation.bench import WORKLOADS, bench_denoise

    report = bench_denoise(preset=preset, device=device, repeats=repeats, model=model,
                           prompts=tuple(prompt_tokens), canvases=tuple(canvas_tokens),
                           workloads=(workload,) if workload else WORKLOADS,
                           progress=None if as_json else lambda line: typer.echo(line, err=True))
    if as_json:
        emit(report.to_json())
        return
    typer.echo(f"{report.model} on {report.device} ({report.dtype}, {report.threads} threads), "
               f"median of {report.repeats} prompts")
    typer.echo(f"{'workload':<8} {'calls':>5} {'canvas':>6} {'prompt':>6} {'ms':>9} {'ref ms':>9} {'speedup':>7} "
               f"{'steps':>5} {'ref steps':>9} {'tok/s':>8} {'cache-only ms':>13}")
    for r in report.results:
        typer.echo(f"{r.workload:<8} {r.calls:>5} {r.canvas:>6} {r.prompt_tokens:>6} {r.median_ms:>9.1f} "
                   f"{r.reference_median_ms:>9.1f} "
                   f"{r.speedup:>6.1f}x {r.steps:>5} {r.reference_steps:>9} {r.tokens_per_s:>8.0f} "
                   f"{r.cache_only_median_ms:>13.1f}")
    for line in report.skipped:
        typer.echo(f"skipped: {line}")
