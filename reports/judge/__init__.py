"""The judge: pure functions over rows and frames that decide (the rows read and labelled, busy,
noise, modes, screens, verdicts, intervals, health) and return data, never text for a page or a
plot; nothing here imports gpubench.reports.render."""
