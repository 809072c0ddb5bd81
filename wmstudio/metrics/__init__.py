"""Metrics over world-model outputs: diversity of samples, agreement of annotators, coherence rates."""
