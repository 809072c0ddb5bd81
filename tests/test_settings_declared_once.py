"""A sampler setting is declared once, in SamplerSettings (issue 38): the Simulate widgets, the Rollouts tab's, the
named API's `simulate` parameters and `wmstudio generate`'s options are all built from its fields, with the same
label, range, choices, default and help; "automatic" and "off" are spelled 0 at every door."""

from __future__ import annotations

import inspect

import pytest
import typer

from wmstudio.cli import app
from wmstudio.model.denoising.sampler_settings import SETTING_NAMES, SamplerSettings
from wmstudio.settings import setting_specs
from wmstudio.store import open_store
from wmstudio.store.seeding import seed_first_run
from wmstudio.studio.context import StudioContext
from wmstudio.ui.studio import build_studio

SPECS = {spec.name: spec for spec in setting_specs(SamplerSettings)}


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    store = open_store(tmp_path_factory.mktemp("declared") / "studio.db")
    seed_first_run(store)
    return build_studio(StudioContext(store=store))


def widgets(studio, prefix: str) -> dict:
    return {block.elem_id[len(prefix):].replace("-", "_"): block for block in studio.blocks.values()
            if isinstance(getattr(block, "elem_id", None), str) and block.elem_id.startswith(prefix)}


def test_the_simulate_widgets_are_the_fields(studio):
    shown = {name: block for name, block in widgets(studio, "simulate-").items() if name in SPECS}
    assert list(shown) == list(SETTING_NAMES)  # every setting, in its declared order
    for name, block in shown.items():
        spec = SPECS[name]
        assert block.label == spec.describe() and block.info == spec.help, name
        if spec.kind == "choice":
            assert [value for _, value in block.choices] == [str(c) for c in spec.choices] and \
                   block.value == str(spec.default)
        else:
            assert block.value == spec.form_default, name
    assert shown["steps"].label == "Steps (0 = automatic, up to 512)"
    assert shown["threshold"].label == "Confidence threshold (0 = off, up to 1)"
    rollouts = widgets(studio, "rollout-")
    for name in ("temperature", "seed"):
        assert rollouts[name].label == SPECS[name].describe() and rollouts[name].value == SPECS[name].default


def test_the_named_api_takes_the_fields(studio):
    simulate = next(fn for fn in studio.fns.values() if fn.api_name == "simulate")
    parameters = list(inspect.signature(simulate.fn).parameters.values())
    assert [p.name for p in parameters] == ["world", "tool", "arguments", "anchors", *SETTING_NAMES]
    for parameter in parameters[4:]:
        spec = SPECS[parameter.name]
        assert parameter.default == (str(spec.default) if spec.kind == "choice" else spec.form_default)
        assert parameter.annotation is {"whole": int, "number": float, "flag": bool, "choice": str}[spec.kind]


def test_the_cli_options_are_the_fields():
    generate = typer.main.get_command(app).commands["generate"]
    options = {param.name: param for param in generate.params}
    for name, spec in SPECS.items():
        option = options[name]
        assert option.default == spec.form_default and option.help == spec.help, name
        assert f"--{name.replace('_', '-')}" in option.opts
    assert "no_threshold" not in options  # off is --threshold 0, as everywhere


def test_zero_is_automatic_or_off_at_every_door_and_an_unknown_name_is_refused():
    assert SamplerSettings(steps=0, threshold=0, block=0) == SamplerSettings(steps=None, threshold=None, block=None)
    assert SamplerSettings.from_form(steps="0", threshold="", block=0.0).threshold is None
    assert SamplerSettings.from_form(seed=2**62).seed == 2**62  # the Rollouts tab once capped it at 2**31 - 1
    with pytest.raises(Exception, match="not a sampler setting"):
        SamplerSettings.from_form(colour="red")
