"""The agent's half of training: scenarios and curricula, the environments an episode is played in, the agent policy
(SFT warm start, GRPO), scripted yardsticks, off-policy evaluation, and GRPO runs as background jobs."""
