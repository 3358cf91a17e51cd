"""Evaluation and benchmark runners, with their data loaders and metrics."""
