"""The studio's Gradio interface: one module per tab, calling down into plain Python functions.

Nothing here holds model or SQL code: the tabs call studio/ services; `app.py` and the `serve` command import it."""
