"""The studio's Gradio interface: one module per tab, calling down into plain Python functions.

Nothing here holds model or SQL code; `app.py` is the only importer."""
