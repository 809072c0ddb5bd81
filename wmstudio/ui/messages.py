"""How every tab says that an action failed: one Markdown message, never a traceback.

Bad input (InvalidInput) lists each problem with where it is; a refused hub push says why; anything unforeseen
is logged with its traceback on the server and shown as one line. The page always says what was kept."""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path

from wmstudio.problems import InvalidInput
from wmstudio.studio.datasets import PushFailed

log = logging.getLogger("wmstudio.ui")


def failure_markdown(err: Exception, doing: str, kept: str = "your inputs are kept") -> str:
    """`**Cannot <doing>** — <kept>:` and the problems as a list (or one line for a failure we did not foresee)."""
    if isinstance(err, InvalidInput):
        items = "\n".join(f"- `{p.path}`: {p.message}" if p.path else f"- {p.message}" for p in err.problems)
        return f"**Cannot {doing}** — {kept}:\n\n{items}"
    if isinstance(err, PushFailed):
        return f"**Cannot {doing}** — {kept}: {err}"
    log.exception("studio action failed: %s", doing)
    return f"**Cannot {doing}**: {type(err).__name__}: {err}. {kept.capitalize()}; the server log has details."


def as_uploaded(message: str, upload: str | Path | None) -> str:
    """`message` naming an uploaded file as the user named it: Gradio keeps uploads as /tmp/gradio/<hash>/<name>,
    a server path that means nothing to the user (and tells a visitor where the server keeps files)."""
    if not upload:
        return message
    path = Path(upload)
    return message.replace(str(path), path.name).replace(f"{path.parent}/", "")


def markdown_as_html(message: str) -> str:
    """A status message (the little Markdown failure_markdown writes: bold, code, list items) as HTML."""
    lines = []
    for line in html.escape(message).splitlines():
        line = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", line)
        line = re.sub(r"`(.+?)`", r"<code>\1</code>", line)
        lines.append(f"<li>{line[2:]}</li>" if line.startswith("- ") else f"<p>{line}</p>" if line else "")
    return f'<div class="wm-message">{"".join(lines)}</div>'.replace("</p><li>", "</p><ul><li>").replace(
        "</li></div>", "</li></ul></div>")
