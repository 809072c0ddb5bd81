"""The world model's half of training: corpus rows as training examples and batches, the MDLM / AR trainer and its
checkpoints, the model card, and the evaluation beside its floors (echo+, echo++, the status rule)."""
