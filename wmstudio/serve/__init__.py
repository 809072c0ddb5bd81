"""Serving the world model to others: HTTP endpoints for external trainers, an OpenEnv environment server, and
the Hugging Face Space build. Calls studio/ services; nothing below imports it."""
