"""The episode wing: the state an episode has reached, worked out from what the world says (state.py), and
what a write's answer states of the records it makes or acts on (made.py, answers.py)."""
