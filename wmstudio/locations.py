"""Where things live: the shipped assets (models, demo worlds) and the user's own data folder.

`WMSTUDIO_HOME` moves the user folder (tests, Spaces); the assets sit beside the package in the repo."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

ASSETS_DIR = Path(__file__).resolve().parents[1] / "assets"
DEMO_WORLDS_DIR = ASSETS_DIR / "worlds"
MODELS_DIR = ASSETS_DIR / "models"


def user_home() -> Path:
    """The user's wmstudio folder (created on first use): `WMSTUDIO_HOME` or the platform's data dir."""
    home = Path(os.environ.get("WMSTUDIO_HOME") or user_data_dir("wmstudio", appauthor=False))
    home.mkdir(parents=True, exist_ok=True)
    return home


def user_worlds_dir() -> Path:
    """Folder where the studio saves the user's world files."""
    folder = user_home() / "worlds"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
