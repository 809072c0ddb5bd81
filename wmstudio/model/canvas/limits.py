"""How long a response canvas may be: read by the canvas and by the sampler's settings, which the command line loads
without torch or transformers (so this module imports nothing)."""

MAX_CANVAS_TOKENS = 4096  # the longest response canvas (its slots and anchors)
