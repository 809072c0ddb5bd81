"""The world model: tokenizer, architecture, response canvas, denoising sampler and backends.

Imports only `wmstudio.world` from the rest of the package (DESIGN.md §2)."""
