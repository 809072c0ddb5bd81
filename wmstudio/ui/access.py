"""Who can reach the studio: on loopback only this machine, so no sign-in is needed; on any other address a studio
without `--auth` (or Hugging Face login on a Space) is open to everyone who can reach it, so it must be asked for.

The same answer decides whose Hugging Face token a dataset push may use (`single_user`)."""

from __future__ import annotations

from dataclasses import dataclass

from wmstudio.network import is_loopback
from wmstudio.ui.identity import on_spaces


@dataclass(frozen=True)
class Exposure:
    """Whether serving on a host may start (`refusal` is None) and what to warn about when it does."""

    refusal: str | None = None
    warning: str | None = None


def exposure(host: str, users: dict[str, str], insecure_no_auth: bool, port: int = 7860) -> Exposure:
    """Refuse an open studio on a non-loopback host unless it has users (--auth), runs on a Space (Hugging Face
    login) or the user said --insecure-no-auth, which starts it with a warning."""
    if is_loopback(host) or users or on_spaces():
        return Exposure()
    if insecure_no_auth:
        return Exposure(warning=f"serving on {host}:{port} without sign-in (--insecure-no-auth): anyone who can reach "
                                "it can read, change and export the studio's data; pushes need a token typed in, "
                                "never this server's HF_TOKEN")
    return Exposure(refusal=f"--host {host} can be reached from other machines and the studio has no sign-in: add "
                            "--auth USER:PASSWORD (repeat it for more annotators), serve on --host 127.0.0.1, or "
                            "pass --insecure-no-auth to open it to everyone anyway")


def single_user(host: str, users: dict[str, str]) -> bool:
    """True for the local studio of one person (loopback, no --auth, not a Space): only it may push with the
    server's own HF_TOKEN; a shared studio would lend that token to every visitor."""
    return is_loopback(host) and not users and not on_spaces()
