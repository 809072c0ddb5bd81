"""Which addresses only this machine reaches: the studio and the world-model server refuse to open anything
else without a sign-in or an API key."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = ("localhost", "localhost.")


def is_loopback(host: str) -> bool:
    """True for addresses only this machine reaches: localhost, 127.0.0.0/8 and ::1."""
    name = (host or "").strip().lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:  # a host name other than localhost, or 0.0.0.0's kind: reachable from elsewhere
        return False
