"""World Model Studio: steered rollouts from a masked diffusion text world model.

Layers, top to bottom: ui -> train -> store -> model -> world (see DESIGN.md §2)."""

__version__ = "0.1.0"
