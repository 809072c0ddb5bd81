"""Worlds: the five parts a text world model conditions on, and everything checkable about them.

Imports nothing else of wmstudio but the base modules (`problems`, `settings`); every upper layer builds on it."""
