#!/usr/bin/env python3
"""The attacks on recovery of issue 16 (docs/RELIABILITY.md, "Recovery"), each TRIALS times:

  cut         an older store (400 changes), db/db truncated at a random 40-75%: start must refuse
              (never panic), --recover must restore every root from the journal
  crash       roots added, the database checkpointed one change short, kill -9, then one bit
              flipped in a random journal record: --recover must keep every acknowledged root
  deleted     the same crash, then the journal deleted: start must refuse, --recover serves what
              the database holds and says the journal is missing
  kill        --recover killed with SIGKILL after a random 0-400 ms: the next start must refuse
              or serve every root; a second --recover must then restore every root
  twice       --recover twice within one second (the database emptied before each): both succeed

    scripts/reliability/recover-attacks.py cut|crash|deleted|kill|twice TRIALS
    (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, random, signal, socket, subprocess, sys, time, shutil, tempfile

PROTOCOL_VERSION = 2
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))

def start(state, sock):
    p = subprocess.Popen([BIN, "--socket", sock, "--state-dir", state], stderr=subprocess.PIPE)
    for _ in range(2000):
        if p.poll() is not None: return p, None
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); return p, s
        except OSError: time.sleep(0.005)
    return p, None
def call(f, i, m, p):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n").encode()); f.flush()
    return json.loads(f.readline())
def hello(s):
    f = s.makefile("rwb"); call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION}); return f
def roots(s):
    return {x["uri"] for x in call(hello(s), 1, "roots.list", {})["result"]["roots"]}
def stop(p, s):
    s.close(); p.send_signal(signal.SIGTERM); p.wait()
def recover(state, sock):
    return subprocess.run([BIN, "--recover", "--socket", sock, "--state-dir", state], capture_output=True, timeout=60)
def served(state, sock):
    """What a start serves, or None if it refused naming --recover; 'other:…' otherwise."""
    p, s = start(state, sock)
    if s is None:
        err = p.stderr.read().decode(); p.wait()
        if p.returncode == 1 and "damaged" in err and "--recover" in err: return None
        return "other:" + err[-300:]
    got = roots(s); stop(p, s); return got
def checkpointed(state, revision):
    want = f'"kind":"checkpoint","revision":{revision}}}'
    for _ in range(2000):
        if want in open(state + "/roots.journal", errors="replace").read(): return
        time.sleep(0.005)
    raise SystemExit("no checkpoint")

def store(base, n, removes=False):
    state, sock = base + "/state", base + "/s.sock"
    p, s = start(state, sock); f = hello(s); uris = set()
    for i in range(n):
        u = f"file:///attack/{'x' * 100}/{i:04}"
        assert "result" in call(f, i + 1, "roots.add", {"roots": [{"uri": u}]}); uris.add(u)
        if removes and i % 3 == 0:
            assert "result" in call(f, i + 1, "roots.remove", {"targets": [{"input": u, "uri": u}]}); uris.discard(u)
    return state, sock, p, s, f, uris

mode, trials = sys.argv[1], int(sys.argv[2])
work = tempfile.mkdtemp(prefix="rootsd-recover-"); os.chmod(work, 0o700); outcomes = {}
for t in range(trials):
    base = os.path.join(work, str(t)); os.makedirs(base)
    if mode == "cut":
        state, sock, p, s, f, uris = store(base, 400, removes=True); stop(p, s)
        path = state + "/db/db"; os.truncate(path, os.path.getsize(path) * random.randint(40, 75) // 100)
    elif mode in ("crash", "deleted"):
        n = random.randint(40, 140)
        state, sock, p, s, f, uris = store(base, n - 1); checkpointed(state, n - 1)
        u = f"file:///attack/last"; assert "result" in call(f, n, "roots.add", {"roots": [{"uri": u}]}); uris.add(u)
        os.kill(p.pid, signal.SIGKILL); p.wait()
        path = state + "/roots.journal"
        if mode == "deleted": os.remove(path)
        else:
            data = bytearray(open(path, "rb").read())
            starts = [0] + [i + 1 for i, b in enumerate(data[:-1]) if b == 10]
            line = random.choice(starts[1:])
            data[line + 12] ^= 1 << random.randrange(8); open(path, "wb").write(data)
    elif mode in ("kill", "twice"):
        state, sock, p, s, f, uris = store(base, 60); stop(p, s)
        os.truncate(state + "/db/db", 0)
    first = served(state, sock)
    kind = "refused" if first is None else ("SERVED-" + ("all" if first == uris else f"{len(first & uris)}-of-{len(uris)}") if isinstance(first, set) else first)
    if mode == "kill":
        r = subprocess.Popen([BIN, "--recover", "--socket", sock, "--state-dir", state], stderr=subprocess.DEVNULL)
        time.sleep(random.uniform(0, 0.4)); r.send_signal(signal.SIGKILL); r.wait()
        mid = served(state, sock)
        kind = "after-kill-" + ("refused" if mid is None else ("served-all" if mid == uris else f"SERVED-{len(mid & uris) if isinstance(mid, set) else mid}"))
    said = recover(state, sock)
    if mode == "twice":
        os.truncate(state + "/db/db", 0); said = recover(state, sock)
        kind += f" second-recover-exit-{said.returncode}"
    after = served(state, sock)
    kind += " recovered-all" if after == uris else f" RECOVERED-{len(after & uris) if isinstance(after, set) else after}-of-{len(uris)}"
    if mode == "deleted" and b"journal is missing" in said.stderr: kind += " says-journal-missing"
    if after != uris: kind += " named-in-COULD-NOT-KEEP" if b"COULD NOT KEEP" in said.stderr else " LOST-SILENTLY"
    outcomes[kind] = outcomes.get(kind, 0) + 1
    shutil.rmtree(base, ignore_errors=True)
print(mode, trials, outcomes)
