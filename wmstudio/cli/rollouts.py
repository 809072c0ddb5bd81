"""Rollouts and curricula in the studio's database (what the Rollouts tab does): `rollouts list|show|export|import`
and `curricula list|create|export|import`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from wmstudio.cli.common import DB_HELP, check_out_folder, emit, load_world, open_store

rollouts_app = typer.Typer(help="Rollouts saved in the studio's database: list, show, export.", no_args_is_help=True)
curricula_app = typer.Typer(help="Curricula (versioned sets of accepted rollouts): list, create, export, import.",
                            no_args_is_help=True)


def _summary_json(summary) -> dict[str, Any]:
    return {"id": summary.id, "world": summary.world_name, "world_version": summary.world_version,
            "title": summary.title, "status": summary.status, "tags": summary.tags, "steps": summary.step_count,
            "failed_steps": summary.failed_steps, "parent_rollout_id": summary.parent_rollout_id,
            "created_at": summary.created_at.isoformat()}


@rollouts_app.command("list")
def rollouts_list(
    world: Optional[str] = typer.Option(None, "--world", help="Only rollouts in this world (any version)."),
    status: Optional[str] = typer.Option(None, "--status", help="pending, accepted or rejected."),
    tag: Optional[str] = typer.Option(None, "--tag", help="Only rollouts with this tag."),
    text: Optional[str] = typer.Option(None, "--text", help="Text in a call, a response or the title."),
    page: int = typer.Option(1, "--page", help="Page number, from 1 (newest first)."),
    page_size: int = typer.Option(50, "--page-size", help="Rollouts per page."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """List rollouts matching the filters (the Rollouts tab's search), newest first."""
    from wmstudio.studio.rollouts import filter_rollouts

    found = filter_rollouts(open_store(db), world=world, status=status, tag=tag, text=text, page=page,
                            page_size=page_size)
    emit({"total": found.total, "page": found.page, "pages": found.pages, "status_counts": found.status_counts,
          "rollouts": [_summary_json(r) for r in found.items]})


@rollouts_app.command("show")
def rollouts_show(
    rollout_id: int = typer.Argument(..., help="The rollout's id."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Print one rollout: its world, status, tags and every step (call, response, checks, how it was made)."""
    from wmstudio.studio.rollouts import exported_rollout

    emit(exported_rollout(open_store(db), rollout_id).to_json())


@rollouts_app.command("export")
def rollouts_export(
    rollout_ids: list[int] = typer.Argument(..., help="Ids of the rollouts to export."),
    out: Path = typer.Option(..., "--out", help="Folder to write the dataset into."),
    name: str = typer.Option("wmstudio rollouts", "--name", help="Dataset name in the card."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Export rollouts as a Hugging Face dataset folder (parquet + JSONL chat rows + card), as curricula are."""
    from wmstudio.studio.datasets import export_dataset
    from wmstudio.studio.rollouts import exported_rollout

    check_out_folder(out)
    store = open_store(db)
    folder = export_dataset([exported_rollout(store, rid) for rid in rollout_ids], out, name)
    emit({"folder": str(folder), "rollouts": len(rollout_ids)})


@rollouts_app.command("import")
def rollouts_import(
    path: Path = typer.Argument(..., help="JSON Lines of world-model chat rows (user turn `State: ...\\n\\nAction: ...`)."),
    world: Optional[Path] = typer.Option(None, "--world", help="The world the rows were made in (default: one "
                                                               "built from the tools the calls name)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Import another project's world-model chat rows (the Patronus format) as new pending rollouts, one per row."""
    from wmstudio.studio.chat_rows import import_chat_rows

    spec = load_world(world) if world is not None else None
    result = import_chat_rows(open_store(db), path, spec)
    if result.repeated:
        typer.echo(f"note: {path} was imported into that world before: nothing was added; these are the rollouts "
                   "it made", err=True)
    emit({"rollouts": result.rollout_ids, "steps": result.steps})


@curricula_app.command("list")
def curricula_list(db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP)) -> None:
    """Every curriculum version: id, name, version, description and how many rollouts it holds."""
    from wmstudio.studio.curricula import list_curricula

    emit([{"id": s.curriculum.id, "name": s.curriculum.name, "version": s.curriculum.version,
           "description": s.curriculum.description, "rollouts": s.rollout_count}
          for s in list_curricula(open_store(db))])


@curricula_app.command("create")
def curricula_create(
    name: str = typer.Argument(..., help="Curriculum name; a new version if it exists."),
    rollout_ids: list[int] = typer.Argument(..., help="Accepted rollouts to add to its latest version."),
    description: str = typer.Option("", "--description", help="What the curriculum is for."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Save the next version of a curriculum: its latest rollouts plus the given ones (accepted rollouts only)."""
    from wmstudio.studio.curricula import add_to_curriculum

    curriculum, added = add_to_curriculum(open_store(db), name, description, rollout_ids)
    emit({"id": curriculum.id, "name": curriculum.name, "version": curriculum.version, "added": added})


@curricula_app.command("export")
def curricula_export(
    name: str = typer.Argument(..., help="Curriculum name."),
    version: Optional[int] = typer.Option(None, "--version", help="Version to export (default: the latest)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Folder (default: the studio's exports folder)."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Write a curriculum version as the dataset folder the studio's Export button writes."""
    from wmstudio.studio.curricula import export_curriculum, get_curriculum

    check_out_folder(out)
    store = open_store(db)
    folder, label = export_curriculum(store, get_curriculum(store, name, version).id, out)
    emit({"folder": str(folder), "curriculum": label})


@curricula_app.command("import")
def curricula_import(
    path: Path = typer.Argument(..., help="An exported dataset: its folder, zip, parquet or JSONL file."),
    db: Optional[Path] = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """Import an exported dataset as new rollouts (worlds are saved as versions)."""
    from wmstudio.studio.curricula import import_dataset_file

    result = import_dataset_file(open_store(db), path)
    if result.repeated:
        typer.echo(f"note: {path} was imported before: nothing was added; these are the rollouts it made", err=True)
    emit({"rollouts": result.rollout_ids, "steps": result.steps})
