"""Where a world model comes from: a local folder or a Hugging Face hub id, and its config.json.

Light on purpose (no torch, no transformers): a command reads its `--model` here first, so a wrong path is refused in
a fraction of a second instead of after the model libraries load."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wmstudio.locations import DEFAULT_MODEL, REPO_ROOT
from wmstudio.problems import InvalidInput


def resolve_model_path(model_id_or_path: str | Path | None) -> str:
    """A local folder (relative paths also tried from the repository root) or a hub id, as given."""
    name = str(model_id_or_path or DEFAULT_MODEL)
    for candidate in (Path(name).expanduser(), REPO_ROOT / name):
        if candidate.is_dir():
            return str(candidate)
    return name


def read_model_config(source: str) -> dict[str, Any]:
    """config.json of a local folder or a hub repository, as a dict; InvalidInput when there is none."""
    local = Path(source)
    if local.is_dir():
        path = local / "config.json"
        if not path.exists():
            raise InvalidInput(f"{source}: no config.json in this folder: not a transformers checkpoint")
    elif local.is_absolute() or source.startswith((".", "~")) or source.count("/") > 1:
        raise InvalidInput(f"model {source}: no such folder: give a model folder or a Hugging Face hub id")
    else:
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(source, "config.json"))
        except Exception as err:  # noqa: BLE001 - offline, unknown repo, gated repo: all mean "cannot load"
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise InvalidInput(
                f"model {source}: not a local folder and not loadable from the Hugging Face hub ({reason}): "
                "check the name, your network, or give a local folder"
            ) from None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise InvalidInput(f"{path}: unreadable config.json ({err}): re-save or re-download the model") from None
    if not isinstance(data, dict):
        raise InvalidInput(f"{path}: config.json is not a JSON object")
    return data


def check_model_source(model_id_or_path: str | Path | None) -> str:
    """The model's resolved source; InvalidInput, as loading would raise it, when it has no readable config.json."""
    source = resolve_model_path(model_id_or_path)
    read_model_config(source)
    return source
