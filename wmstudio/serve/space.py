"""The Hugging Face Space: `build_space(OUT)` assembles a deployable folder, and `DatabaseExport` keeps the
Space's SQLite (on its ephemeral local disk) exported to a dataset repo.

The folder holds the package, the embedded models and demo worlds, the entry `app.py` (from `spaces/`), a
requirements file made from pyproject's dependencies (one list to keep), and a README whose front matter says
which Gradio we test, the entry, Python, hardware, Hugging Face login for annotators and the models."""

from __future__ import annotations

import re
import shutil
import threading
import tomllib
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from wmstudio.locations import ASSETS_DIR, REPO_ROOT
from wmstudio.problems import InvalidInput, Problem
from wmstudio.studio.written_files import (
    check_out_folder,
    digests_of,
    file_digest,
    in_the_way,
    record_written,
    refuse_in_the_way,
    remove_written,
    text_digest,
    written_before,
)

SPACE_SOURCE = REPO_ROOT / "spaces"
HARDWARE = ("cpu-basic", "cpu-upgrade", "zero-a10g", "t4-small", "a10g-small")
SHIPPED_ASSETS = ("models", "worlds", "examples")
EXPORT_EVERY_MINUTES = 10
EXPORT_FILE = "wmstudio.sqlite"
ZERO_GPU_REQUIREMENT = "spaces>=0.30"
SPACE_BUILD = "wmstudio space build"  # the command named in the folder's record of what it wrote


@dataclass
class SpaceBuild:
    """What `build_space` wrote: the folder, its front matter and the requirements."""

    folder: Path
    front_matter: dict[str, Any]
    requirements: list[str]


def build_space(out: Path, hardware: str = "cpu-upgrade", models: list[str] | None = None,
                force: bool = False) -> SpaceBuild:
    """Assemble the Space in `out`: a new or empty folder, or with `force` one an earlier build wrote into, whose
    files from that build are replaced. Only the Space's own files (this build's fixed list) are ever replaced, and
    only where the folder's record vouches that the build wrote them: a path a (planted) record lists that is not one
    of them is never touched, nor a clone's .git; InvalidInput names what is in the way before anything is touched."""
    if hardware not in HARDWARE:
        raise InvalidInput(Problem("hardware", f"{hardware!r} is not a Space hardware we build for: use "
                                               f"{', '.join(HARDWARE)}"))
    out = Path(out)
    check_out_folder(out)
    requirements = package_requirements()
    if hardware.startswith("zero"):
        requirements.append(ZERO_GPU_REQUIREMENT)
    front = {"title": "World Model Studio", "emoji": "🌍", "colorFrom": "indigo", "colorTo": "blue",
             "sdk": "gradio", "sdk_version": version("gradio"), "python_version": "3.11", "app_file": "app.py",
             "suggested_hardware": hardware, "hf_oauth": True, "models": list(models or []), "pinned": False}
    texts = {"requirements.txt": "\n".join(requirements) + "\n",
             "README.md": front_matter_text(front) + (SPACE_SOURCE / "README.md").read_text(encoding="utf-8")}
    copies = space_sources()
    planned = [*copies, *texts]
    ours: set[str] = set()
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise InvalidInput(Problem("out", f"{out} exists and is not an empty folder: choose a new folder, or "
                                              "--force to replace what an earlier `space build` wrote there "
                                              "(nothing else in it is touched)"))
        ours = written_before(out, SPACE_BUILD) & set(planned)  # the Space's own files only, whatever a record says
        refuse_in_the_way(out, in_the_way(out, planned, ours), SPACE_BUILD, "move it away, or build into a new "
                                                                           "folder and copy the Space from there")
    try:
        out.mkdir(parents=True, exist_ok=True)
        about_to_write = {**{name: file_digest(source) for name, source in copies.items()},
                          **{name: text_digest(text) for name, text in texts.items()}}
        record_written(out, SPACE_BUILD, {**digests_of(out, ours), **about_to_write})  # a build cut short: its own
        remove_written(out, ours)
        for name, source in copies.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, out / name)
        for name, text in texts.items():
            (out / name).write_text(text, encoding="utf-8")
        record_written(out, SPACE_BUILD, digests_of(out, planned))
    except OSError as err:
        raise InvalidInput(Problem("out", f"{err.filename or out}: cannot be written ({err.strerror or err}): "
                                          "choose a writable folder")) from None
    return SpaceBuild(out, front, requirements)


def space_sources() -> dict[str, Path]:
    """What the Space holds from this checkout, by its path in the Space: the package, the shipped assets and the
    entry app.py (no caches)."""
    trees = [(REPO_ROOT / "wmstudio", "wmstudio")] + [(ASSETS_DIR / name, f"assets/{name}") for name in SHIPPED_ASSETS]
    found = {"app.py": SPACE_SOURCE / "app.py"}
    for root, prefix in trees:
        for path in sorted(root.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                found[f"{prefix}/{path.relative_to(root).as_posix()}"] = path
    return found


def package_requirements() -> list[str]:
    """The package's dependencies as pyproject lists them (the Space installs them from requirements.txt)."""
    data = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return [re.sub(r"\s+", "", item) for item in data["project"]["dependencies"]]


def front_matter_text(front: dict[str, Any]) -> str:
    """The README's YAML front matter block."""
    import yaml

    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True) + "---\n\n"


def read_front_matter(readme: Path) -> dict[str, Any]:
    """The front matter of a Space README (InvalidInput when it has none)."""
    import yaml

    text = Path(readme).read_text(encoding="utf-8")
    match = re.match(r"---\n(.*?)\n---\n", text, re.DOTALL)
    if match is None:
        raise InvalidInput(Problem(str(readme), "no front matter (a block between --- lines at the top)"))
    return yaml.safe_load(match.group(1))


def snapshot_database(db_path: Path, folder: Path) -> Path:
    """A consistent copy of the live database in `folder` (SQLite's online backup: writers may keep writing)."""
    from wmstudio.studio.serving import backup_database  # the store and its trainers: not for `space build`

    folder.mkdir(parents=True, exist_ok=True)
    target = folder / EXPORT_FILE
    partial = folder / f".{EXPORT_FILE}.partial"
    partial.unlink(missing_ok=True)
    backup_database(db_path, partial).replace(target)
    return target


def start_database_export(db_path: Path, folder: Path, repo_id: str, token: str | None,
                          every_minutes: float = EXPORT_EVERY_MINUTES, hf_api: Any = None):
    """Export the studio's database to dataset repo `repo_id` now and every `every_minutes` after (a snapshot is
    taken right before each commit), so ratings and rollouts outlive the Space's ephemeral disk."""
    from huggingface_hub import CommitScheduler

    class DatabaseExport(CommitScheduler):
        snapshot_lock = threading.Lock()  # the scheduler's own thread and a manual trigger may push at once

        def push_to_hub(self):
            with self.snapshot_lock:
                snapshot_database(db_path, folder)
                return super().push_to_hub()

    return DatabaseExport(repo_id=repo_id, repo_type="dataset", folder_path=folder, every=every_minutes,
                          token=token, private=True, allow_patterns=[EXPORT_FILE], hf_api=hf_api)
