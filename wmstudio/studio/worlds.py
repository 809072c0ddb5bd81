"""Saved worlds behind the World tab, `wmstudio serve-wm` and the HTTP API: list them, read one, save a new version,
and open the studio's database (upgraded, seeded with the demo worlds on first run).

The store's world queries are re-exported here, so ui/, cli/ and serve/ reach saved worlds through this door."""

from __future__ import annotations

from pathlib import Path

from wmstudio.store import (  # noqa: F401 - re-exported: the door to the store's worlds
    Store,
    get_world,
    list_worlds,
    save_world_version,
    world_versions,
)
from wmstudio.store import open_store as _open_store
from wmstudio.store.seeding import seed_first_run


def open_studio_store(db: str | Path | None = None, seed: bool = False) -> Store:
    """The studio's database at `db` (default: WMSTUDIO_DB or the user data folder), upgraded; with `seed`, the
    demo worlds and their example rollouts are saved on first run (as the studio does when it starts)."""
    store = _open_store(db)
    if seed:
        seed_first_run(store)
    return store
