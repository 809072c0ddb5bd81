"""The world model, in wings that import one another one way only (docs/architecture.md, "model/ by wing"):
network → canvas → heads → serving → denoising → generation.

Imports only `wmstudio.world` and the base modules from the rest of the package."""
