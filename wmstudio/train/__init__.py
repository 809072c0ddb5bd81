"""Training and evaluation: corpus rows as training examples, the world-model trainer, and its evaluation.

Imports world, model, metrics and store; never studio, serve, ui or cli (docs/architecture.md)."""
