#!/usr/bin/env python3
"""Kill -9 rounds (docs/RELIABILITY.md, "Data"): starts rootsd, adds roots one acknowledged
request at a time for a random 50-300 ms, kills it with SIGKILL, restarts it and checks that every
acknowledged root is there. Exits 1 on the first loss.

    scripts/reliability/crash-rounds.py ROUNDS   (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, random, signal, socket, subprocess, sys, time, shutil, tempfile

# The control protocol these scripts speak (docs/PROTOCOL.md).
PROTOCOL_VERSION = 2
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))
base = tempfile.mkdtemp(prefix="rootsd-crash-")
shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
sock = base + "/s.sock"; state = base + "/state"
def start():
    p = subprocess.Popen([BIN, "--socket", sock, "--state-dir", state], stderr=subprocess.DEVNULL)
    for _ in range(500):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); return p, s
        except OSError: time.sleep(0.01)
    raise SystemExit("no start")
def call(f, i, m, p):
    f.write((json.dumps({"jsonrpc":"2.0","id":i,"method":m,"params":p})+"\n").encode()); f.flush()
    return json.loads(f.readline())
acked = []; total_rounds = int(sys.argv[1]); n = 0
for r in range(total_rounds):
    p, s = start(); f = s.makefile("rwb")
    call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
    have = {x["uri"] for x in call(f, 1, "roots.list", {})["result"]["roots"]}
    missing = [u for u in acked if u not in have]
    if missing: print("LOST", len(missing)); sys.exit(1)
    deadline = time.time() + random.uniform(0.05, 0.3)
    try:
        while time.time() < deadline:
            uri = f"file:///crash/r{r}/d{n}"; n += 1
            rep = call(f, n, "roots.add", {"roots": [{"uri": uri}]})
            if "result" in rep: acked.append(uri)
    finally:
        os.kill(p.pid, signal.SIGKILL); p.wait()
p, s = start(); f = s.makefile("rwb"); call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
have = {x["uri"] for x in call(f, 1, "roots.list", {})["result"]["roots"]}
print("rounds", total_rounds, "acknowledged", len(acked), "lost", len([u for u in acked if u not in have]))
os.kill(p.pid, signal.SIGTERM); p.wait()
