#!/usr/bin/env python3
"""Damage trials (docs/RELIABILITY.md, "Data"): a store of 100 roots is written, then its database
or journal is damaged (one flipped bit, emptied, or cut at a record boundary); rootsd must refuse
to start (never serve fewer roots), and `rootsd --recover` must restore all 100. Prints how each
trial ended.

    scripts/reliability/damage.py db|journal TRIALS flip|truncate|cut
    (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, random, signal, socket, subprocess, sys, time, shutil, tempfile

# The control protocol these scripts speak (docs/PROTOCOL.md).
PROTOCOL_VERSION = 2
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))
def run(state, sock, extra=[]):
    return subprocess.run([BIN, "--socket", sock, "--state-dir", state] + extra, capture_output=True, timeout=30)
def start(state, sock):
    p = subprocess.Popen([BIN, "--socket", sock, "--state-dir", state], stderr=subprocess.PIPE)
    for _ in range(500):
        if p.poll() is not None: return p, None
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); return p, s
        except OSError: time.sleep(0.01)
    return p, None
def call(f, i, m, p):
    f.write((json.dumps({"jsonrpc":"2.0","id":i,"method":m,"params":p})+"\n").encode()); f.flush()
    return json.loads(f.readline())
def roots(s):
    f = s.makefile("rwb"); call(f,0,"hello",{"protocol_version":PROTOCOL_VERSION})
    return {x["uri"] for x in call(f,1,"roots.list",{})["result"]["roots"]}
work = tempfile.mkdtemp(prefix="rootsd-damage-")
target = sys.argv[1]; trials = int(sys.argv[2]); outcomes = {}
for t in range(trials):
    base = os.path.join(work, f"flip{t}"); shutil.rmtree(base, ignore_errors=True); os.makedirs(base)
    state = base + "/state"; sock = base + "/s.sock"
    p, s = start(state, sock); f = s.makefile("rwb"); call(f,0,"hello",{"protocol_version":PROTOCOL_VERSION})
    uris = {f"file:///flip/d{i}" for i in range(100)}
    for i,u in enumerate(sorted(uris)): call(f, i+1, "roots.add", {"roots":[{"uri":u}]})
    s.close(); p.send_signal(signal.SIGTERM); p.wait()
    path = state + ("/db/db" if target == "db" else "/roots.journal")
    data = bytearray(open(path,"rb").read())
    if sys.argv[3] == "truncate": data = data[:0]
    elif sys.argv[3] == "cut":
        ends = [i+1 for i,b in enumerate(data) if b == 10]
        data = data[:random.choice(ends[len(ends)//2:-1])]
    else:
        at = random.randrange(len(data)); data[at] ^= 1 << random.randrange(8)
    open(path,"wb").write(data)
    p, s = start(state, sock)
    if s is None:
        p.wait(); err = p.stderr.read().decode()
        kind = "refused" if "damaged" in err and "--recover" in err else "failed-other:" + err[-200:]
        r = run(state, sock, ["--recover"])
        p2, s2 = start(state, sock)
        got = roots(s2) if s2 else set()
        kind += " recovered-all" if got == uris else f" recovered-{len(got & uris)}"
        if s2: s2.close(); p2.send_signal(signal.SIGTERM); p2.wait()
    else:
        got = roots(s); kind = "served-all" if got == uris else f"SERVED-SHORT-{len(got)}"
        s.close(); p.send_signal(signal.SIGTERM); p.wait()
    outcomes[kind] = outcomes.get(kind, 0) + 1
    shutil.rmtree(base, ignore_errors=True)
print(target, sys.argv[3], trials, outcomes)
