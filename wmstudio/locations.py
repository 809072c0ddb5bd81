"""Where things live: the shipped assets (models, demo worlds) and the user's own data folder.

`WMSTUDIO_HOME` moves the user folder (tests, Spaces); the assets sit beside the package in the repo. Model
names are kept repository-relative (`assets/models/...`), as provenance records them, and resolved here."""

from __future__ import annotations

import os
from pathlib import Path

from platformdirs import user_data_dir

REPO_ROOT = Path(__file__).resolve().parents[1]
ASSETS_DIR = REPO_ROOT / "assets"
DEMO_WORLDS_DIR = ASSETS_DIR / "worlds"
MODELS_DIR = ASSETS_DIR / "models"
DEFAULT_MODEL = (MODELS_DIR / "wm-mdlm-small").relative_to(REPO_ROOT).as_posix()  # the embedded MDLM
DEFAULT_AR_MODEL = (MODELS_DIR / "wm-ar-pair").relative_to(REPO_ROOT).as_posix()  # its autoregressive baseline


def user_home() -> Path:
    """The user's wmstudio folder (created on first use): `WMSTUDIO_HOME` or the platform's data dir."""
    home = Path(os.environ.get("WMSTUDIO_HOME") or user_data_dir("wmstudio", appauthor=False))
    home.mkdir(parents=True, exist_ok=True)
    return home
