"""Widgets built from a settings dataclass's fields (settings.py): a setting's label, range, choices, default and
help are declared once, and the Simulate tab shows them as declared.

Numbers get no bounds of their own in the widget: an out-of-range value reaches the settings' check, which names
the setting and its range in the status line (a widget would clamp it silently)."""

from __future__ import annotations

from typing import Any

import gradio as gr

from wmstudio.settings import SettingSpec

CHOICE_LABELS = {"none": "none: the model tracks the state", "oracle": "oracle: the simulator's state in the prompt"}


def setting_widget(spec: SettingSpec, **kwargs: Any) -> gr.components.Component:
    """The widget of one setting: a checkbox, a dropdown of its choices, a slider (a number with a `step`) or a
    number box, labelled and defaulted as the field declares, its help as the widget's info."""
    common = {"label": spec.describe(), "info": spec.help, **kwargs}
    if spec.kind == "flag":
        return gr.Checkbox(spec.default, **common)
    if spec.kind == "choice":
        choices = [(CHOICE_LABELS.get(str(value), str(value)), str(value)) for value in spec.choices]
        return gr.Dropdown(choices, value=str(spec.default), **common)
    if spec.step is not None:
        return gr.Slider(0 if spec.zero else spec.low, spec.high, value=spec.form_default, step=spec.step, **common)
    return gr.Number(spec.form_default, precision=0 if spec.kind == "whole" else None, **common)
