"""mkfiles.py SRC.csv DIR: the committed example run as other tools hand it back, one file (or folder) per variant
under DIR: what a spreadsheet, pandas, gzip, a browser or a hand edit makes of a results CSV."""
import csv
import gzip
import io
import os
import shutil
import sys
import zipfile

src, out = sys.argv[1], sys.argv[2]
os.makedirs(out, exist_ok=True)
text = open(src, encoding="utf-8", newline="").read()
rows = list(csv.reader(io.StringIO(text)))
header, body = rows[0], rows[1:]


def write(name, rows, **kw):
    enc = kw.pop("encoding", "utf-8")
    with open(os.path.join(out, name), "w", encoding=enc, newline="") as f:
        csv.writer(f, **kw).writerows(rows)


open(os.path.join(out, "J1.csv.gz"), "wb").write(gzip.compress(text.encode()))
write("J2-excel.csv", rows, encoding="utf-8-sig", quoting=csv.QUOTE_ALL, lineterminator="\r\n")   # Excel "CSV UTF-8"
write("J3-semicolon.csv", rows, delimiter=";")                                                  # a European locale's CSV
write("J4-pandas-index.csv", [["", *header]] + [[str(i), *r] for i, r in enumerate(body)])       # to_csv() with its index
order = sorted(range(len(header)), key=lambda i: header[i])
write("J5-columns-sorted.csv", [[r[i] for i in order] for r in rows])                           # columns sorted by name
write("J6-rows-reversed.csv", [header, *body[::-1]])                                            # sorted by a column
write("J7-added-column.csv", [[*header, "note"]] + [[*r, "checked by hand"] for r in body])    # a column of the user's
drop = header.index("reason")
write("J8-column-removed.csv", [[v for i, v in enumerate(r) if i != drop] for r in rows])       # a column deleted
sv = header.index("schema_version")
write("J9-future-schema.csv", [header] + [[("99" if i == sv else v) for i, v in enumerate(r)] for r in body])
write("J12-cr-only.csv", rows, lineterminator="\r")                                             # classic Mac line ends
with zipfile.ZipFile(os.path.join(out, "J13-xlsx.csv"), "w") as z:                             # an .xlsx saved as .csv
    z.writestr("[Content_Types].xml", "<Types/>")
    z.writestr("xl/workbook.xml", "<workbook/>")
write("J14-tabs.csv", rows, delimiter="\t")                                                     # a TSV named .csv
os.makedirs(os.path.join(out, "J10-empty-files"), exist_ok=True)                                # 1,000 empty files beside a run
for i in range(1000):
    open(os.path.join(out, "J10-empty-files", f"e{i:04d}.csv"), "w").close()
shutil.copy(src, os.path.join(out, "J10-empty-files", "run.csv"))
for d in ("J11-a", "J11-b"):                                                                    # one run in two folders
    os.makedirs(os.path.join(out, d), exist_ok=True)
    shutil.copy(src, os.path.join(out, d, "run.csv"))
os.makedirs(os.path.join(out, "J16-download-twice"), exist_ok=True)                             # a browser's second download
shutil.copy(src, os.path.join(out, "J16-download-twice", "run.csv"))
shutil.copy(src, os.path.join(out, "J16-download-twice", "run (1).csv"))
shutil.copy(src, os.path.join(out, "J15-renamed.csv"))                                          # renamed: file name != run id
