"""The `wmstudio` command: every capability of the studio, scriptable from a terminal.

Commands print JSON on stdout, warnings on stderr, and exit 0 (ok), 1 (checked and failed) or
2 (bad input, with a message naming the file, field and fix)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from wmstudio.problems import InvalidInput

app = typer.Typer(
    help="World Model Studio: steered rollouts from a masked diffusion text world model.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
tools_app = typer.Typer(help="Import tool schemas from the formats people already have.", no_args_is_help=True)
app.add_typer(tools_app, name="tools")


def fail(message: str, code: int = 2) -> None:
    """Print `error: message` on stderr and exit with `code` (2 = bad input)."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def emit(data: Any, out: Optional[Path] = None) -> None:
    """Write JSON to `out` or stdout."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if out is None:
        typer.echo(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n", encoding="utf-8")


def _load_world(path: Path):
    from wmstudio.world.spec import load_world

    return load_world(path)


def _read_json(path: Path, what: str) -> Any:
    from wmstudio.world.spec import read_json_file

    try:
        return read_json_file(path)
    except InvalidInput as err:
        raise InvalidInput(err.problems, source=f"{what} file") from None


@app.command()
def validate(world: Path = typer.Argument(..., help="World file (JSON) to check.")) -> None:
    """Load a world file and report every problem with its JSON path."""
    try:
        spec = _load_world(world)
    except InvalidInput as err:
        fail(str(err))
    typer.echo(f"ok: world {spec.name!r} with {len(spec.tools)} tools and {len(spec.rules)} rules")


@tools_app.command("import")
def tools_import(
    path: Path = typer.Argument(..., help="File with tool definitions (JSON, JSON Lines or YAML)."),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto|openai|mcp|bfcl|toolemu|tau|api-bank|swe-agent"),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Write the JSON list here instead of stdout."),
) -> None:
    """Print (or write) the tools of PATH as a normalised JSON list of OpenAI-style functions."""
    from wmstudio.world.tools import import_tools_file

    try:
        result = import_tools_file(path, fmt)
    except InvalidInput as err:
        fail(str(err))
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    emit([tool.to_json() for tool in result.tools], out)


@app.command()
def check(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    response: Path = typer.Option(..., "--response", help="The tool response to check (a file)."),
    anchor: list[str] = typer.Option([], "--anchor", help='Pinned field, PATH=VALUE (JSON value): status="error".'),
    history: Optional[Path] = typer.Option(None, "--history", help="Earlier steps, a JSON list of {call, response}."),
) -> None:
    """Check a response against JSON, the tool's response schema, the world's rules and the anchors."""
    from wmstudio.world.anchors import parse_anchor
    from wmstudio.world.checks import check_step
    from wmstudio.world.spec import Call

    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        anchors = [parse_anchor(text) for text in anchor]
        steps = _read_json(history, "history") if history else []
        if not response.exists():
            raise InvalidInput(f"{response}: no such file")
        text = response.read_bytes().decode("utf-8", errors="replace")
        report = check_step(spec, the_call, text, anchors=anchors, history=steps)
    except InvalidInput as err:
        fail(str(err))
    emit(report.to_json())
    raise typer.Exit(0 if report.ok else 1)


@app.command()
def prompt(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help="Call JSON file."),
    history: Optional[Path] = typer.Option(None, "--history", help="Earlier steps, a JSON list of {call, response}."),
    max_chars: Optional[int] = typer.Option(None, "--max-chars", min=200, help="Middle-truncate the history to fit."),
    fmt: str = typer.Option("sections", "--format", help="sections (plain prompt) or chat (one messages row)."),
) -> None:
    """Render the world-model prompt for a call, in the section format or as a chat row."""
    from wmstudio.world.prompt import render_chat, render_prompt
    from wmstudio.world.spec import Call

    if fmt not in ("sections", "chat"):
        fail(f"--format {fmt!r} is not known: use sections or chat")
    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        steps = _read_json(history, "history") if history else []
        if fmt == "sections":
            typer.echo(render_prompt(spec, the_call, steps, max_chars=max_chars))
        else:
            emit(render_chat(spec, the_call, steps, max_chars=max_chars))
    except InvalidInput as err:
        fail(str(err))


@app.command()
def corpus(
    out: Path = typer.Option(..., "--out", help="Folder for train.jsonl, eval.jsonl and test.jsonl."),
    rows: int = typer.Option(10000, "--rows", min=3, help="Total rows over the three splits."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same files."),
) -> None:
    """Write a world-model corpus from the simulated worlds, in the public chat format."""
    from wmstudio.world.corpus import write_corpus

    try:
        stats = write_corpus(out, rows=rows, seed=seed)
    except InvalidInput as err:
        fail(str(err))
    emit(stats)


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(7860, "--port"),
    db: Optional[Path] = typer.Option(None, "--db", help="SQLite file (default: WMSTUDIO_DB or the user data dir)."),
    model: Optional[str] = typer.Option(None, "--model", help="World model: local path or hub id (default: embedded)."),
    ar_model: Optional[str] = typer.Option(None, "--ar-model", help="Autoregressive baseline (default: embedded)."),
    auth: list[str] = typer.Option([], "--auth", help="Require sign-in: USER:PASSWORD, repeat for more annotators."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow checkpoints' own model code."),
) -> None:
    """Open the studio in the browser at http://HOST:PORT."""
    from wmstudio.model.backends import DEFAULT_AR_MODEL
    from wmstudio.ui.studio import launch

    users = {}
    for item in auth:
        user, sep, password = item.partition(":")
        if not sep or not user or not password:
            fail(f"--auth {item!r}: write USER:PASSWORD, e.g. --auth alice:s3cret")
        users[user] = password
    try:
        launch(host=host, port=port, db=db, model=model, ar_model=ar_model or DEFAULT_AR_MODEL,
               trust_remote_code=trust_remote_code, users=users)
    except InvalidInput as err:
        fail(str(err))


# --- world-model training and evaluation (trainer) -----------------------------------------------------


@app.command("train-wm")
def train_wm(
    corpus: Path = typer.Option(..., "--corpus", help="Folder with train.jsonl (and eval.jsonl) chat rows."),
    out: Path = typer.Option(..., "--out", help="Model folder to write, e.g. assets/models/wm-mdlm-small."),
    arch: str = typer.Option("mdlm", "--arch", help="mdlm (masked diffusion) or ar (autoregressive baseline)."),
    minutes: float = typer.Option(30.0, "--minutes", help="Wall-clock budget; the schedule ends with it."),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, help="Stop after this many optimizer steps."),
    seed: int = typer.Option(0, "--seed"),
    base: Optional[str] = typer.Option(None, "--base", help="Fine-tune this checkpoint (folder or hub id)."),
    max_rows: Optional[int] = typer.Option(None, "--max-rows", min=1, help="Use only the first N training rows."),
    threads: Optional[int] = typer.Option(None, "--threads", min=1, help="CPU threads for torch."),
) -> None:
    """Train a small world model on a corpus (tokenizer included) and save it with a model card."""
    from wmstudio.train.training import TrainConfig, train_world_model

    config = TrainConfig(corpus=corpus, out=out, arch=arch, minutes=minutes, steps=steps, seed=seed, base=base,
                         max_rows=max_rows, threads=threads)
    try:
        result = train_world_model(config, log=lambda text: typer.echo(text, err=True))
    except InvalidInput as err:
        fail(str(err))
    emit(result.to_json())


@app.command("eval-wm")
def eval_wm(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder; its test split is held out."),
    model: str = typer.Option("assets/models/wm-mdlm-small", "--model", help="The masked diffusion model."),
    ar: Optional[str] = typer.Option("assets/models/wm-ar-small", "--ar", help="AR baseline ('' for none)."),
    rows: int = typer.Option(60, "--rows", min=1, help="Held-out rows to generate for."),
    diversity_calls: int = typer.Option(8, "--diversity-calls", min=0, help="Calls sampled K times for diversity."),
    samples: int = typer.Option(8, "--samples", min=2, help="K: samples per call at temperature 1."),
    split: str = typer.Option("test", "--split"),
    seed: int = typer.Option(0, "--seed"),
    write: bool = typer.Option(False, "--write", help="Save quality.json in the model folder, update its card."),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON report."),
) -> None:
    """Measure a world model on held-out rows: validity, rule consistency, pinned-anchor flips, diversity."""
    from wmstudio.model.backends import resolve_model_path
    from wmstudio.train.evaluation import evaluate_world_model, write_quality

    try:
        report = evaluate_world_model(model, ar or None, corpus, rows=rows, diversity_calls=diversity_calls,
                                      samples=samples, split=split, seed=seed)
    except InvalidInput as err:
        fail(str(err))
    if write:
        for folder in [model, ar] if ar else [model]:
            write_quality(report, Path(resolve_model_path(folder)))
    if not as_json:
        typer.echo(report.render(), err=True)
    emit(report.to_json())


# --- generation and the denoising benchmark (engine) ---------------------------------------------------

bench_app = typer.Typer(help="Measure how fast the engine runs on this machine.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")


@app.command("generate")
def generate_cmd(
    world: Path = typer.Argument(..., help="World file."),
    call: Path = typer.Option(..., "--call", help='Call JSON file: {"name": ..., "arguments": {...}}.'),
    anchor: list[str] = typer.Option([], "--anchor", help='Pinned field, PATH=VALUE (JSON value): status="error".'),
    model: Optional[str] = typer.Option(None, "--model", help="Model folder or hub id (default: the shipped MDLM)."),
    history: Optional[Path] = typer.Option(None, "--history", help="Earlier steps, a JSON list of {call, response}."),
    steps: Optional[int] = typer.Option(None, "--steps", min=1, help="Step budget (default: about masked/4)."),
    strategy: str = typer.Option("low_confidence", "--strategy", help="low_confidence|margin|entropy|random."),
    threshold: float = typer.Option(0.9, "--threshold", min=0.0, max=1.0, help="Also commit slots this confident."),
    no_threshold: bool = typer.Option(False, "--no-threshold", help="Linear schedule only (LLaDA's)."),
    block: Optional[int] = typer.Option(None, "--block", min=1, help="Slots per left-to-right block."),
    temperature: float = typer.Option(0.0, "--temperature", min=0.0, help="Gumbel-noise temperature (0 = greedy)."),
    repetition_penalty: float = typer.Option(1.0, "--repetition-penalty", min=1.0, help="CTRL penalty, e.g. 1.3."),
    samples: int = typer.Option(1, "--samples", min=1, max=64, help="K samples, denoised as one batch."),
    seed: int = typer.Option(0, "--seed"),
    free: bool = typer.Option(False, "--free", help="One free span instead of the response-schema skeleton."),
    free_length: int = typer.Option(64, "--free-length", min=1, max=4096, help="Slots of the free span."),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help="Allow LLaDA/Dream model code."),
    approximate_cache: bool = typer.Option(
        False, "--approximate-cache", help="Cache the prompt of a fully bidirectional model (inexact, faster)."
    ),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda or mps (default: the best there is)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of the live view."),
) -> None:
    """Generate the response to a call with the world model: a live view of the denoising, or --json."""
    from wmstudio.model.backends import DEFAULT_MODEL, load_backend
    from wmstudio.model.generation import Generation, generate_stream
    from wmstudio.model.sampler import STRATEGIES
    from wmstudio.world.anchors import parse_anchors
    from wmstudio.world.spec import Call

    if strategy not in STRATEGIES:
        fail(f"--strategy {strategy!r} is not known: use one of {', '.join(STRATEGIES)}")
    try:
        spec = _load_world(world)
        the_call = Call.from_json(_read_json(call, "call"), source="call")
        anchors = parse_anchors(anchor)
        steps_before = _read_json(history, "history") if history else []
        backend = load_backend(model or DEFAULT_MODEL, trust_remote_code=trust_remote_code, device=device,
                               approximate_cache=approximate_cache)
        stream = generate_stream(
            backend, spec, the_call, anchors, history=steps_before, free=free, free_length=free_length, steps=steps,
            strategy=strategy, threshold=None if no_threshold else threshold, block=block, temperature=temperature,
            repetition_penalty=repetition_penalty, samples=samples, seed=seed,
        )
        result = _run_generation(stream, live=not as_json)
    except InvalidInput as err:
        fail(str(err))
    except OSError as err:  # unreadable weights or tokenizer files
        fail(f"cannot load the model: {err}")
    assert isinstance(result, Generation)
    if as_json:
        emit(result.to_json())
        return
    for k, sample in enumerate(result.samples):
        verdict = "ok" if sample.checks.ok else "; ".join(_check_problems(sample.checks)) or "failed"
        typer.echo(f"--- sample {k + 1} ({sample.steps} steps): {verdict}")
        typer.echo(sample.response)
    typer.echo(f"{result.model}, {result.mode} canvas, {result.elapsed_ms:.0f} ms", err=True)


def _run_generation(stream, live: bool):
    """Drain `stream`; with `live`, redraw the first sample's canvas in the terminal at every frame."""
    from wmstudio.model.generation import Generation

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
    return problems


@bench_app.command("denoise")
def bench_denoise_cmd(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu or cuda (default: the best there is)."),
    preset: str = typer.Option("default", "--preset", help="default (shipped model) or llada-8b (random, GPU)."),
    repeats: int = typer.Option(5, "--repeats", min=1, max=100, help="Timed runs per configuration."),
    model: Optional[str] = typer.Option(None, "--model", help="Time this wmstudio MDLM instead of the default."),
) -> None:
    """Time our sampler against LLaDA's reference loop for canvases of 32/64/128 and prompts of ~400/1024."""
    from wmstudio.model.bench import bench_denoise

    try:
        report = bench_denoise(preset=preset, device=device, repeats=repeats, model=model,
                               progress=None if as_json else lambda line: typer.echo(line, err=True))
    except InvalidInput as err:
        fail(str(err))
    if as_json:
        emit(report.to_json())
        return
    typer.echo(f"{report.model} on {report.device} ({report.dtype}, {report.threads} threads), "
               f"median of {report.repeats}")
    typer.echo(f"{'canvas':>6} {'prompt':>6} {'ms':>9} {'ref ms':>9} {'speedup':>7} {'steps':>5} {'ref steps':>9} "
               f"{'tok/s':>8} {'cache-only ms':>13}")
    for r in report.results:
        typer.echo(f"{r.canvas:>6} {r.prompt_tokens:>6} {r.median_ms:>9.1f} {r.reference_median_ms:>9.1f} "
                   f"{r.speedup:>6.1f}x {r.steps:>5} {r.reference_steps:>9} {r.tokens_per_s:>8.0f} "
                   f"{r.cache_only_median_ms:>13.1f}")
    for line in report.skipped:
        typer.echo(f"skipped: {line}")


def main() -> None:  # pragma: no cover - console entry
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
