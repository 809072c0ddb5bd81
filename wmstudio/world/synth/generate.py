"""Draw a synthetic world's blueprint from (seed, index).

The same (seed, index) always gives the same blueprint, hence the same world file and the same simulator: a world
file names its simulator `synthetic:<seed>:<index>`, and that is all the generic simulator needs to execute it
(worlds.py builds it, and writes world files)."""

from __future__ import annotations

import random

from wmstudio.world.synth import names
from wmstudio.world.synth.blueprint import Blueprint
from wmstudio.world.synth.entities import make_entities
from wmstudio.world.synth.messages import VOICES
from wmstudio.world.synth.naming import Style, code_word
from wmstudio.world.synth.schemas import with_definitions
from wmstudio.world.synth.sessions import draw_login, require_session
from wmstudio.world.synth.shapes import plan_shapes
from wmstudio.world.synth.tools import errors_note, plan_tools

GENERATOR = "wmstudio-synth/1"  # the stream every blueprint is drawn from; change it and every world changes
LARGE_SHARE = 0.06  # initial states with one long listing (50+ records)
DEFINITIONS_SHARE = 0.3  # worlds whose response schemas name their nested objects under `$defs`


def theme_of(seed: int, index: int) -> names.Theme:
    """The theme of synthetic world `index` of `seed` (the first thing its blueprint draws), without the rest."""
    return random.Random(f"{GENERATOR}/{seed}/{index}").choice(names.THEMES)


def generate_blueprint(seed: int, index: int, shapes: bool = False) -> Blueprint:
    """The blueprint of synthetic world `index` of `seed`: theme, style, entities, tools, auth and words; with
    `shapes`, also a tool of each shape of shapes.py, drawn from a stream of their own (the rest is the same)."""
    rng = random.Random(f"{GENERATOR}/{seed}/{index}")
    theme = rng.choice(names.THEMES)
    style = Style(case=rng.choice(["snake", "snake", "camel"]), voice=rng.choice(VOICES))
    money = rng.choice(["cents", "cents", "minor"])
    entities = make_entities(rng, theme, style, money)
    core = theme.host.split(".")[0]
    bp = Blueprint(seed=seed, index=index, name=f"{core}-{seed}-{index}", domain=theme.domain, host=theme.host,
                   style=style, now_key=style.key(rng.choice(["now", "current time", "as of"])),
                   actor=entities[0].name, entities={e.name: e for e in entities}, money=money,
                   token_style=rng.choice(["b64", "prefixed", "hex"]), retry_seconds=rng.choice([5, 10, 20, 45, 60]),
                   large_share=LARGE_SHARE)
    bp.codes = {"missing": rng.choice(names.MISSING_CODES), "invalid": rng.choice(names.INVALID_CODES),
                "unknown_tool": rng.choice(names.UNKNOWN_TOOL_CODES),
                "time_format": rng.choice(names.TIME_FORMAT_CODES),
                "credentials": rng.choice(names.CREDENTIAL_CODES), "expired": rng.choice(names.EXPIRED_CODES),
                "bad_token": rng.choice(names.BAD_TOKEN_CODES), "no_auth": rng.choice(names.NO_AUTH_CODES),
                "argument_word": rng.choice(["Argument", "Field", "Parameter"])}
    bp.transient = tuple(code.format(D=code_word(core)) for code in rng.sample(names.TRANSIENT_CODES, 4))
    if rng.random() < 0.35:
        bp.login = draw_login(rng, bp)
    bp.tools = plan_tools(rng, bp)
    if rng.random() < DEFINITIONS_SHARE:
        for plan in bp.tools:
            plan.response = with_definitions(plan.response, bp.entities)
    if shapes:
        _add_shapes(bp)
    return bp


def _add_shapes(bp: Blueprint) -> None:
    """The shapes' tools, with the world's session parameter and error notes like every other tool."""
    bp.shapes = True
    bp.name += "-shapes"
    added: list = []
    for plan in plan_shapes(random.Random(f"{GENERATOR}/shapes/{bp.seed}/{bp.index}"), bp):
        if all(plan.name != other.name for other in [*bp.tools, *added]):
            added.append(plan)
    if bp.login is not None:
        require_session(bp, added)
    for plan in added:
        plan.description += errors_note(bp, plan)
    bp.tools += added
