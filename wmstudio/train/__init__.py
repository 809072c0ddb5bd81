"""Training and evaluation, in two halves that never import each other: world_model/ (corpus rows as training
examples, the world-model trainer, its evaluation and floors) and agent/ (scenarios and curricula, the
environments an episode is played in, the agent policy's SFT and GRPO, its background runs).

Imports world, model, metrics and store; never studio, serve, ui or cli (docs/architecture.md)."""
