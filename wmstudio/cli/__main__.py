"""`python -m wmstudio.cli ...`: the `wmstudio` command (how the studio starts a training run)."""

from wmstudio.cli import main

main()
