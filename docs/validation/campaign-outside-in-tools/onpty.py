"""onpty.py COLS FILE COMMAND...: runs COMMAND on a pseudo-terminal COLS columns wide (set before it starts, as a
narrow terminal window is) and keeps every byte it writes in FILE. Then says how the screen would look: for each
stretch rewritten in place (\r) or ended (\n), its visible width (escape sequences left out); a stretch wider
than COLS wraps, and a \r after a wrapped stretch rewrites only its last row: garbage on the screen."""
import fcntl
import os
import pty
import re
import struct
import sys
import termios

cols, path, command = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:  # the child, on the terminal's slave side: the window's size set before the command starts
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 40, cols, 0, 0))
    os.execvp(command[0], command)
chunks = []
while True:
    try:
        data = os.read(fd, 65536)
    except OSError:
        break
    if not data:
        break
    chunks.append(data)
_, status = os.waitpid(pid, 0)
raw = b"".join(chunks)
open(path, "wb").write(raw)
text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", raw.decode("utf-8", "replace"))
stretches = re.split(r"[\r\n]", text)
wide = [s for s in stretches if len(s) > cols]
ESC = bytes([27])
rewrites = text.count("\r") - text.count("\r\n")
print(f"pty {cols} columns: {len(raw)} bytes, {text.count(chr(10))} lines, {rewrites} in-place rewrites, "
      f"ESC {raw.count(ESC)}, stretches wider than {cols}: {len(wide)}")
for s in wide[:8]:
    print(f"  {len(s)}: {s[:100]!r}")
sys.exit(os.waitstatus_to_exitcode(status))
