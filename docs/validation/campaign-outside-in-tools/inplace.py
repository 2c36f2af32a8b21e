"""inplace.py FILE COLS: the stretches of a terminal transcript that a lone \r then rewrites in place, their widths,
and how many are wider than COLS (each such one wraps, and the \r after it returns only to the start of its last
row: the rows above stay on the screen, the garbage of a narrow window). A line ended by \n may wrap: it stays."""
import re
import sys

raw = open(sys.argv[1], "rb").read().decode("utf-8", "replace").replace("\r\n", "\n")
raw = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw)
cols = int(sys.argv[2])
parts = re.split(r"(\r|\n)", raw)
widths = [len(parts[i]) for i in range(0, len(parts) - 1, 2)
          if parts[i + 1] == "\r" and parts[i]]
print(f"in-place stretches {len(widths)}, widest {max(widths, default=0)}, "
      f"wider than {cols} columns: {sum(w > cols for w in widths)}")
