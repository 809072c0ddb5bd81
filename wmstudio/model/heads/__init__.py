"""What fills a canvas before the model denoises: the learned heads (copy, outcome and its messages) and the
hand-built copies from the state (a record, a listing, a folder, a text answer, what the call echoes)."""
