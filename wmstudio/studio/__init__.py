"""The services behind every studio action: simulate, rollouts, curricula, datasets, annotation.

Plain functions over a StudioContext or a Store, called alike by ui/, cli.py and tests; no Gradio here."""
