"""Leaderboards built from a directory of run summaries (tables per protocol, plots, HTML)."""
