"""Where a world model runs: backends over transformers checkpoints (and how a left-to-right one honours pins),
request batching, and a world model reached over HTTP."""
