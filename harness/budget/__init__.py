"""The run's time, in one place (no torch, no pytest): its deadline, computed once (`clock`); what
each case costs (`cost_model`, and the evidence records.durations reads); each case's share and the
typed over-budget outcome (`shares`); the plan, its lines and its promise (`plan`); whether a later
build starts (`builds`); and the run's last word on what was promised and delivered (`promise`)."""
