"""Regular expressions as finite automata, for the span grammars that make text match a pattern and for repair,
which brings text a rule's `matches` rejects to the nearest text that matches.

JSON Schema's `pattern` and CEL's `matches` both search: a pattern matches anywhere in the text unless anchored
with `^...$`. `search_regex` writes that as a whole-text expression, `automaton` compiles one (interegular),
remembered because the sampler steps through the same few automata for every token."""

from __future__ import annotations

from functools import lru_cache


def search_regex(pattern: str) -> str:
    """The whole-text expression for `pattern` as JSON Schema and CEL read it: anchored as it is, else anywhere."""
    anchored = pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")
    return pattern[1:-1] if anchored else f".*({pattern}).*"


@lru_cache(maxsize=256)
def automaton(regex: str):
    """The compiled automaton of a whole-text expression (interegular's FSM); the compiler's errors pass through."""
    import interegular

    return interegular.parse_pattern(regex).to_fsm()


def pattern_automaton(pattern: str):
    """The automaton of a JSON Schema / CEL pattern, or None for one the compiler cannot read (look-arounds,
    back-references)."""
    try:
        return automaton(search_regex(pattern))
    except Exception:  # noqa: BLE001 - interegular raises several kinds for what it cannot compile
        return None
