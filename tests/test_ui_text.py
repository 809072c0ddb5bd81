"""What the studio writes on its pages reads on a machine without an emoji font (a Debian server's Chromium draws
boxes for them): the text of every UI module uses words, and signs from ordinary fonts (✓ ✗ · … →) at most."""

from __future__ import annotations

import ast
from pathlib import Path

import wmstudio.ui

UI = Path(wmstudio.ui.__file__).parent
# characters drawn as emoji by default (Unicode's Emoji_Presentation) in the Basic Multilingual Plane
EMOJI_BMP = {*range(0x231A, 0x231C), *range(0x23E9, 0x23ED), 0x23F0, 0x23F3, *range(0x25FD, 0x25FF),
             *range(0x2614, 0x2616), *range(0x2648, 0x2654), 0x267F, 0x2693, 0x26A1, 0x26AA, 0x26AB, 0x26BD, 0x26BE,
             0x26C4, 0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2, 0x26F3, 0x26F5, 0x26FA, 0x26FD, 0x2705, 0x270A, 0x270B,
             0x2728, 0x274C, 0x274E, *range(0x2753, 0x2756), 0x2757, *range(0x2795, 0x2798), 0x27B0, 0x27BF, 0x2B1B,
             0x2B1C, 0x2B50, 0x2B55}


def needs_an_emoji_font(text: str) -> list[str]:
    """The characters of `text` a browser draws with an emoji font: pictographs, the BMP's emoji, and any sign
    asked for as emoji (followed by U+FE0F)."""
    found = []
    for index, char in enumerate(text):
        asked = text[index + 1: index + 2] == "\ufe0f"
        if ord(char) >= 0x1F000 or ord(char) in EMOJI_BMP or asked:
            found.append(char + ("\ufe0f" if asked else ""))
    return found


def test_the_helper_finds_emoji_and_passes_ordinary_signs():
    assert needs_an_emoji_font("✅ saved · ⚠️ careful 🚀") == ["✅", "⚠\ufe0f", "🚀"]
    assert needs_an_emoji_font("✓ checks pass · ✗ some fail · … → ⚠ ◀ ▶") == []


def test_no_ui_module_writes_an_emoji():
    found = {}
    for module in sorted(UI.glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and needs_an_emoji_font(node.value):
                found.setdefault(module.name, []).extend(needs_an_emoji_font(node.value))
    assert found == {}
