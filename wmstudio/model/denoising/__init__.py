"""Denoising a canvas: the sampler loop, its settings and confidence strategies, the decode trace and the
repetition penalty inside text spans."""
