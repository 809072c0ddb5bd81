"""The network and its words: the Llama denoiser (and the AR baseline), its tokenizer, one fast canvas pass, where a
checkpoint comes from and the response schemas it was trained with."""
