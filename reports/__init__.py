"""Report builder: reads gpubench CSVs only (no torch, no pytest) and writes tables, plots and
markdown. Pure functions compute; plots.py and markdown.py render."""
