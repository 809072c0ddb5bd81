"""Corpora: chat rows for training made from simulators, their plan, and trajectory files read into histories."""
