"""The world model: tokenizer, architecture, response canvas, denoising sampler and backends.

Imports only `wmstudio.world` and the base modules from the rest of the package (docs/architecture.md)."""
