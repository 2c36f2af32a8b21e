"""Report builder: reads gpubench CSVs only (no torch, no pytest); functions compute, plots/markdown
render."""
