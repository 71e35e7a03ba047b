#!/usr/bin/env python3
"""Store growth under back-to-back writes (docs/RELIABILITY.md, "Bounded store"): a workspace of
ROOTS roots (each URI about 100 bytes), then one connection that adds and removes one more root as
fast as each change is acknowledged, for SECONDS. Samples the journal's size and the database
directory's every 0.25 s, then stops rootsd, restarts it and reports how long the start took, its
peak RSS, and the sizes after the restart.

    scripts/reliability/growth.py ROOTS SECONDS   (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, signal, socket, subprocess, sys, time, shutil, tempfile

PROTOCOL_VERSION = 2
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))
roots, seconds = int(sys.argv[1]), float(sys.argv[2])
base = tempfile.mkdtemp(prefix="rootsd-growth-"); os.chmod(base, 0o700)
state = base + "/state"; sock = base + "/s.sock"

def start():
    t = time.time()
    p = subprocess.Popen([BIN, "--socket", sock, "--state-dir", state], stderr=subprocess.DEVNULL)
    for _ in range(3000):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); return p, s, time.time() - t
        except OSError: time.sleep(0.005)
    raise SystemExit("no start")
def call(f, i, m, p):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n").encode()); f.flush()
    while True:
        reply = json.loads(f.readline())
        if reply.get("id") == i: return reply
def du(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try: total += os.path.getsize(os.path.join(dirpath, name))
            except OSError: pass
    return total
def journal():
    try: return os.path.getsize(state + "/roots.journal")
    except OSError: return 0
def hwm(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"): return int(line.split()[1]) // 1024
MiB = 1 << 20

p, s, _ = start(); f = s.makefile("rwb"); call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
pad = "p" * 60
uris = [f"file:///growth/{pad}/{i:05}" for i in range(roots)]
for at in range(0, roots, 200):
    r = call(f, 1, "roots.add", {"roots": [{"uri": u} for u in uris[at:at + 200]]})
    assert "result" in r, r
live = journal()  # right after the adds: close to the snapshot of the live data once compacted
extra = f"file:///growth/{pad}/extra"
n = 0; peak_journal = peak_db = 0; deadline = time.time() + seconds; next_sample = 0
while time.time() < deadline:
    n += 1
    if n % 2: r = call(f, n + 10, "roots.add", {"roots": [{"uri": extra}]})
    else: r = call(f, n + 10, "roots.remove", {"targets": [{"input": extra, "uri": extra}]})
    assert "result" in r, r
    if time.time() >= next_sample:
        peak_journal = max(peak_journal, journal()); peak_db = max(peak_db, du(state + "/db"))
        next_sample = time.time() + 0.25
peak_journal = max(peak_journal, journal()); peak_db = max(peak_db, du(state + "/db"))
s.close(); p.send_signal(signal.SIGTERM); p.wait()
stopped_journal, stopped_db = journal(), du(state + "/db")
p, s, took = start(); f = s.makefile("rwb"); call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
listed = len(call(f, 1, "roots.list", {})["result"]["roots"])
rss = hwm(p.pid)
s.close(); p.send_signal(signal.SIGTERM); p.wait()
print(f"roots {roots}: {n} changes in {seconds:.0f} s ({n / seconds:.0f}/s); journal after the adds {live / MiB:.2f} MiB")
print(f"  peak: journal {peak_journal / MiB:.2f} MiB, db/ {peak_db / MiB:.2f} MiB")
print(f"  stopped: journal {stopped_journal / MiB:.2f} MiB, db/ {stopped_db / MiB:.2f} MiB")
print(f"  restart: {took:.2f} s to answer, peak RSS {rss} MiB, {listed} roots listed; db/ then {du(state + '/db') / MiB:.2f} MiB")
shutil.rmtree(base, ignore_errors=True)
