"""Deterministic checks of a response: the CheckReport (JSON, schema, rules, anchors) and the text checks of its
message (ids and numbers nothing holds, garbled words)."""
