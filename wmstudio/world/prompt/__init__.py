"""The prompt: the five parts rendered as sections (ours or the Patronus paper's layout) within a budget, the
call-local state, the computed query state, and chat rows read back into turns."""
