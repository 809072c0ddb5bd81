"""The world model: `model train|eval|fit-outcome|keep-schemas` (train it on a corpus, measure it beside its
baselines, refit its outcome head, keep its response schemas).

The flat names of earlier releases (`train-wm`, `eval-wm`, `fit-outcome`, `keep-schemas`) still work, as hidden
aliases, for one more release."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from wmstudio.cli.common import emit, fail
from wmstudio.cli.options import config_command, grounding_option
from wmstudio.locations import DEFAULT_AR_MODEL, DEFAULT_MODEL
from wmstudio.studio.training import DEFAULT_CHAT_LENGTH, PairConfig, TrainConfig, trained_model_folder
from wmstudio.world.grounding import Grounding

model_app = typer.Typer(help="The world model: train it, evaluate it, refit its outcome head, keep its schemas.",
                        no_args_is_help=True)
aliases = typer.Typer()  # the flat names of earlier releases, hidden
TRAIN_SUMMARY = ("Train a world model on a corpus of chat rows (`wmstudio corpus`): the masked diffusion model with its "
                 "copy and outcome heads, or the AR baseline; weights, tokenizer and `training.json` go to --out.")


def _train_wm(config) -> None:
    from wmstudio.studio.training import train_world_model

    emit(train_world_model(config, log=lambda text: typer.echo(text, err=True)).to_json())


config_command(model_app, "train", TrainConfig, _train_wm, summary=TRAIN_SUMMARY)
config_command(aliases, "train-wm", TrainConfig, _train_wm, summary=TRAIN_SUMMARY, hidden=True)


def _train_pair(config) -> None:
    from wmstudio.studio.training import train_pair

    emit(train_pair(config, log=lambda text: typer.echo(text, err=True)))


config_command(model_app, "train-pair", PairConfig, _train_pair)


@model_app.command("fit-outcome")
@aliases.command("fit-outcome", hidden=True)
def fit_outcome(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder; its train split is fitted on."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The model folder the head is saved in."),
    rows: Optional[int] = typer.Option(None, "--rows", min=1, help="Fit on the first N training rows (all: none)."),
    seed: int = typer.Option(0, "--seed"),
    messages_only: bool = typer.Option(False, "--messages-only",
                                       help="Fit only the messages the head writes to an outcome (per tool and "
                                            "outcome, from the training answers), keeping the head's weights."),
) -> None:
    """Fit a model's outcome head (status, error code and the message written to them, from the call and the
    state) on a corpus and save it in the model folder: what `train-wm` does after training, for a model trained
    before."""
    from wmstudio.studio.training import fit_messages, fit_outcome_head, read_corpus_split

    folder = trained_model_folder(model)
    if messages_only:
        emit({"model": str(folder), **fit_messages(read_corpus_split(corpus, "train", rows), folder, str(corpus))})
        return
    fitted = fit_outcome_head(read_corpus_split(corpus, "train", rows), folder, seed=seed, corpus=str(corpus))
    if fitted is None:
        fail(f"{corpus}: no training row names a simulated world (`meta`) and answers ok or error, so there is "
             "nothing to fit on: use a `wmstudio corpus` folder")
    emit({"model": str(folder), **fitted})


@model_app.command("keep-schemas")
@aliases.command("keep-schemas", hidden=True)
def keep_schemas(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder the model was trained on; its train split."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The model folder the schemas are kept in."),
    rows: Optional[int] = typer.Option(None, "--rows", min=1, help="Read the first N training rows (all: none)."),
) -> None:
    """Keep the response schemas the corpus's tools were trained with beside a model (`trained_schemas.json`), so
    a world that leaves a tool's schema out still gets its skeleton: what `train-wm` does after training."""
    from wmstudio.studio.training import read_corpus_split, write_trained_schemas

    folder = trained_model_folder(model)
    fitted = write_trained_schemas(read_corpus_split(corpus, "train", rows), folder, corpus=str(corpus))
    if fitted is None:
        fail(f"{corpus}: no training row names a simulated world (`meta`) whose tool has a response schema, so "
             "there is none to keep: use a `wmstudio corpus` folder")
    emit({"model": str(folder), **fitted})


@model_app.command("eval")
@aliases.command("eval-wm", hidden=True)
def eval_wm(
    corpus: Path = typer.Option(..., "--corpus", help="Corpus folder; its test split is held out."),
    model: str = typer.Option(DEFAULT_MODEL, "--model", help="The masked diffusion model."),
    ar: Optional[str] = typer.Option(DEFAULT_AR_MODEL, "--ar", help="AR baseline ('' for none)."),
    rows: int = typer.Option(200, "--rows", min=1, help="Held-out rows to generate for."),
    diversity_calls: int = typer.Option(8, "--diversity-calls", min=0, help="Calls sampled K times for diversity."),
    samples: int = typer.Option(8, "--samples", min=2, max=8, help="K: samples per call at temperature 1."),
    split: str = typer.Option("test", "--split"),
    seed: int = typer.Option(0, "--seed"),
    grounding: Grounding = grounding_option(),
    worlds: str = typer.Option("all", "--worlds", help="Which rows: all, demo (the five demo worlds) or "
                                                        "heldout-synthetic (synthetic worlds never trained on)."),
    write: bool = typer.Option(False, "--write", help="Save quality.json in the model folder, update its card."),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON report."),
    chat_length: int = typer.Option(DEFAULT_CHAT_LENGTH, "--chat-length", min=8, max=1024,
                                    help="Response tokens per row on a chat-format corpus (no schema to size it)."),
) -> None:
    """Measure a world model on held-out rows: field accuracy by kind beside baselines that can win (echo, a status
    rule, the nearest training response, constants), with each head switched off, checks, pinned-anchor flips, free
    mode, whether it reads its prompt, and diversity. A corpus of chat rows without
    `meta` (another project's) is scored by the Patronus protocol: exact, JSON-semantic and ROUGE-L match."""
    from wmstudio.model.network.sources import check_model_source, resolve_model_path
    from wmstudio.world.corpus.rows import check_corpus_folder

    check_corpus_folder(corpus)  # the inputs first: the model libraries take seconds to load
    for source in [model, ar] if ar else [model]:
        check_model_source(source)
    from wmstudio.studio.training import evaluate_world_model, read_corpus_split, score_chat_corpus, write_quality

    def progress(done: int, total: int) -> None:
        if not as_json:
            typer.echo(f"\r{done}/{total} rows", err=True, nl=done == total)

    if not any(row.meta for row in read_corpus_split(corpus, split)):
        chat = score_chat_corpus(model, ar or None, corpus, rows=rows, split=split, seed=seed,
                                 length=chat_length, progress=progress)
        if not as_json:
            typer.echo(chat.render(), err=True)
            for error in chat.errors[:10]:
                typer.echo(f"warning: {error}", err=True)
        emit(chat.to_json())
        return
    report = evaluate_world_model(model, ar or None, corpus, rows=rows, diversity_calls=diversity_calls,
                                  samples=samples, split=split, seed=seed, grounding=grounding, worlds=worlds,
                                  progress=progress)
    if write:
        for folder in [model, ar] if ar else [model]:
            write_quality(report, Path(resolve_model_path(folder)))
    if not as_json:
        typer.echo(report.render(), err=True)
        for error in report.errors[:10]:
            typer.echo(f"warning: {error}", err=True)
    emit(report.to_json())
