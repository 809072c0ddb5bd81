"""Synthetic worlds: a procedural generator of whole worlds (entities, tools, CEL rules, directives) and the generic
simulator that executes any of them, so every synthetic world has ground truth (issue 33).

A world is drawn from (seed, index) (generate.py); its simulator is named `synthetic:<seed>:<index>`
(registry.py), built by worlds.py, and behaves like a demo world's simulator (simulator.py)."""

from __future__ import annotations

from wmstudio.world.synth.registry import is_synthetic, parse_ref, synthetic_ref
from wmstudio.world.synth.worlds import synthetic_simulator

__all__ = ["is_synthetic", "parse_ref", "synthetic_ref", "synthetic_simulator"]
