"""What the studio's HTTP and browser tests share: a free loopback port, and how to start Debian's Chromium.

On the path through `pythonpath = ["tests"]` in pyproject.toml."""

from __future__ import annotations

import socket

CHROMIUM = "/usr/bin/chromium"  # Debian's package, installed by .ci/run
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]  # root in a container, and no network to reach


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
