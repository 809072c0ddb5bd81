"""The services behind every studio action: worlds, simulation, rollouts, curricula, datasets, annotation, runs,
training and serving.

The only door to the store and the trainers: ui/, cli/ and serve/ call these plain functions over a StudioContext
or a Store (as tests do), never store/ or train/ themselves; no Gradio here."""
