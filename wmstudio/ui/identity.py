"""Who the annotator is: a Hugging Face login on Spaces, the signed-in user with `--auth`, else a name typed once.

Resolved again on every rating from what the server knows (the OAuth session, the auth cookie), so with a login
nobody can rate under another name by typing it; locally the typed name is kept in the browser."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from wmstudio.problems import InvalidInput, Problem

SPACE_ENV = "SPACE_ID"
NAME_STORAGE_KEY = "wmstudio-annotator-name"  # where gr.BrowserState keeps the typed name (localStorage)


@dataclass(frozen=True)
class Identity:
    """An annotator as the store names them: `source` is hf (Hugging Face login), auth (--auth user) or local."""

    name: str
    source: str

    def describe(self) -> str:
        """How the page says who is rating."""
        how = {"hf": "Hugging Face account", "auth": "signed-in user", "local": "name on this computer"}[self.source]
        return f"Rating as **{self.name}** ({how})."


def on_spaces() -> bool:
    """True when the studio runs in a Hugging Face Space (which sets SPACE_ID)."""
    return bool(os.environ.get(SPACE_ENV))


def sign_in_mode(users: dict[str, str] | None) -> str:
    """How annotators identify here: hf on Spaces, auth when --auth gave users, else local (a typed name)."""
    if on_spaces():
        return "hf"
    return "auth" if users else "local"


def resolve_identity(typed_name: Any, username: str | None, hf_username: str | None,
                     users: dict[str, str] | None) -> Identity:
    """The annotator for one action; InvalidInput says how to sign in when nobody is known.

    A Hugging Face login wins, then the `--auth` user; a typed name counts only in the open local studio."""
    mode = sign_in_mode(users)
    if hf_username:
        return Identity(hf_username, "hf")
    if mode == "hf":
        raise InvalidInput(Problem("annotator", "log in with Hugging Face (the button above) before rating"))
    if mode == "auth":
        if username:
            return Identity(username, "auth")
        raise InvalidInput(Problem("annotator", "sign in to the studio (the user given with --auth) before rating"))
    if not isinstance(typed_name, str) or not typed_name.strip():
        raise InvalidInput(Problem("annotator", "type your name above (it is kept in this browser) before rating"))
    return Identity(typed_name.strip(), "local")


def request_username(request: Any) -> str | None:
    """The user Gradio signed in with `--auth` (None in an open studio or without a request)."""
    if request is None:
        return None
    return getattr(request, "username", None) or None


def profile_username(profile: Any) -> str | None:
    """The Hugging Face username of an OAuth profile (None when logged out)."""
    if profile is None:
        return None
    return getattr(profile, "username", None) or getattr(profile, "preferred_username", None) or None
