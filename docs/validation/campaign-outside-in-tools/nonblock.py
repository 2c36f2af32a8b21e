"""nonblock.py COMMAND...: runs COMMAND with its stdout (a pipe) switched to O_NONBLOCK, as a Node.js or Go parent
leaves it; a reader that sleeps before reading lets the pipe (shrunk to 4 KiB) fill."""
import fcntl
import os
import sys

flags = fcntl.fcntl(1, fcntl.F_GETFL)
fcntl.fcntl(1, fcntl.F_SETFL, flags | os.O_NONBLOCK)
fcntl.fcntl(1, 1031, 4096)  # F_SETPIPE_SZ: a 4 KiB pipe, so a few lines fill it
os.execvp(sys.argv[1], sys.argv[1:])
