"""World Model Studio: steered rollouts from a masked diffusion text world model.

Layers, top to bottom (imports only point down): cli, ui, serve -> studio -> train -> store -> model, metrics ->
world, over the base modules problems, settings, locations and network; studio/ is the only door cli/, ui/ and
serve/ use (docs/architecture.md, guarded by tests/test_layers.py)."""

__version__ = "0.1.0"
