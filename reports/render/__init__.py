"""The renderers: what the judge (gpubench.reports.judge) decided, as markdown, plots, console
lines and the report's folder. They decide nothing: every threshold, flag and verdict rule is the
judge's."""
