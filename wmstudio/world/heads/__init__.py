"""What the model's heads read from a world: the values the prompt shows (copy sources and candidates) and the
facts the outcome head scores."""
