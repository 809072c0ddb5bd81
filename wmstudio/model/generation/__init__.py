"""One call in, checked answers out, by stage: the prompt, the outcome chosen before denoising, the canvas filled,
repair, the answer cache; chat rows with no world; the speed benchmark."""
