"""The report side of gpubench: reads gpubench CSVs only (no torch, no pytest). `judge/` decides
(which machine a row belongs to, what is busy, noisy, impossible, which verdict a case gets) and
returns data: frames, dataclasses, enums; `render/` turns what the judge decided into markdown,
plots and console lines, and decides nothing. render imports judge, never the other way."""
