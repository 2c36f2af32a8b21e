"""Each hand-made result pickle through the fleet's own settle() on submitit's LocalJob, as the fleet reads it."""
import copyreg, io, os, pickle, resource, sys, time
from pathlib import Path
from submitit.local.local import LocalJob
from gpubench.harness.commands.fleet import FleetJob, Target, settle

base = Path(sys.argv[1]); base.mkdir(parents=True, exist_ok=True)
MARK = str(base / "RAN")
TOUCH = f"touch {MARK}".encode()
EXEC = f"open({MARK!r}, 'w')".encode()
P = pickle
g = lambda m, n: b"c" + m.encode() + b"\n" + n.encode() + b"\n"
cases = {
  "GLOBAL+REDUCE (c os\\nsystem)": b"\x80\x02" + g("os", "system") + b"X" + len(TOUCH).to_bytes(4, "little") + TOUCH + b"\x85R.",
  "STACK_GLOBAL": b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93\x8c\x04true\x85R.",
  "INST": b"(S'true'\nios\nsystem\n.",
  "OBJ": b"\x80\x02(" + g("os", "system") + b"X\x04\x00\x00\x00trueo.",
  "NEWOBJ": b"\x80\x02" + g("builtins", "object") + b")\x81.",
  "NEWOBJ_EX": b"\x80\x04" + g("builtins", "object") + b")}\x92.",
  "REDUCE on a str (no global)": b"\x80\x02X\x01\x00\x00\x00aX\x01\x00\x00\x00b\x85R.",
  "BUILD on a list": b"\x80\x02]X\x01\x00\x00\x00a}\x86b.",
  "EXT1 250 (registered here)": b"\x80\x02\x82\xfa.",
  "EXT1 + REDUCE (builtins.exec cached)": b"\x80\x02\x82\xfbX" + len(EXEC).to_bytes(4, "little") + EXEC + b"\x85R.",
  "EXT2": b"\x80\x02\x83\xfa\x00.",
  "EXT4": b"\x80\x02\x84\xfa\x00\x00\x00.",
  "PERSID": b"Pfoo\n.",
  "BINPERSID": b"\x80\x02X\x03\x00\x00\x00foaQ.",
  "protocol 0 outcome": P.dumps(("success", "text"), protocol=0),
  "protocol 2 with BINSTRING (py2 str)": b"\x80\x02U\x07successU\x04text\x86q\x00.",
  "protocol 5 outcome (submitit's)": P.dumps(("success", "text"), protocol=5),
  "truncated": P.dumps(("success", "x" * 1000), protocol=5)[:500],
  "70 MiB outcome": P.dumps(("success", "x" * (70 << 20)), protocol=5),
  "64 MiB - 1 KiB outcome": P.dumps(("success", "x" * ((64 << 20) - 1024)), protocol=5),
  "bytes not text": P.dumps(("success", b"text"), protocol=5),
  "LONG of 10 million digits": b"L" + b"9" * 10_000_000 + b"L\n.",
  "INT of 10 million digits": b"I" + b"9" * 10_000_000 + b"\n.",
  "memo amplification (20M BINGET of one 1 KiB str)": b"\x80\x02X\x00\x04\x00\x00" + b"a" * 1024 + b"q\x00(" + b"h\x00" * 20_000_000 + b"l.",
  "FRAME claiming 2**62 bytes": b"\x80\x04\x95" + (1 << 62).to_bytes(8, "little") + b"N.",
  "deep nesting 1e6 tuples": b"\x80\x02" + b"(" * 1000000 + b"t" * 1000000 + b".",
}
copyreg.add_extension("os", "system", 250)
copyreg.add_extension("builtins", "exec", 251)
pickle.loads(b"\x80\x02\x82\xfb.")
# prime the extension cache as any normal unpickling of an EXT pickle in this process would
pickle.loads(b"\x80\x02\x82\xfa.")
for i, (name, data) in enumerate(cases.items()):
    folder = base / f"j{i}"
    folder.mkdir(mode=0o700, exist_ok=True)
    job = FleetJob(Target("t"), "r", job=LocalJob(folder, "7"))
    job.job.paths.result_pickle.write_bytes(data)
    t = time.monotonic()
    settle(job, None, now=0.0, grace_s=0.0)
    print(f"{name:40s} -> {job.state:6s} {time.monotonic()-t:5.2f}s {job.reason[:150]!r} (peak RSS so far {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MiB)")
print("code ran:", os.path.exists(MARK))
