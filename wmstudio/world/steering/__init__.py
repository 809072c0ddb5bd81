"""Steering: pinned anchor fields, directives, and the stress presets built from them."""
