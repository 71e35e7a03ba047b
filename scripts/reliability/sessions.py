#!/usr/bin/env python3
"""Session state (docs/RELIABILITY.md, "Sessions", issue 16 item 6): registers SESSIONS sessions
(default 2,000, as the attack did), each with a LABEL_KIB KiB label and a report whose server
name, version and protocol version are as long again, then pages through sessions.list as
rootsctl does, checking that every answer fits the 1 MiB line and lists every session, and
prints the daemon's RSS. `--at-bounds` sends texts exactly at the daemon's bounds instead, for
the table at its largest (use SESSIONS=16384, the cap, with `ulimit -n` above it).

    scripts/reliability/sessions.py [SESSIONS] [LABEL_KIB] [--at-bounds]
    (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, socket, subprocess, sys, tempfile, time, shutil

PROTOCOL_VERSION = 2
MAX_LINE = 1 << 20
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
at_bounds = "--at-bounds" in sys.argv
sessions = int(args[0]) if args else 2000
label_kib = int(args[1]) if len(args) > 1 else 256
base = tempfile.mkdtemp(prefix="rootsd-sessions-")
sock = base + "/s.sock"
daemon = subprocess.Popen([BIN, "--socket", sock, "--state-dir", base + "/state"], stderr=subprocess.DEVNULL)

def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024

def connect():
    for _ in range(500):
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(sock); return s.makefile("rwb")
        except OSError: time.sleep(0.01)
    raise SystemExit("rootsd did not start")

def call(f, i, method, params):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()); f.flush()
    while True:
        line = f.readline()
        message = json.loads(line)
        if message.get("id") == i:
            return message, len(line)

try:
    first = connect()
    call(first, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
    baseline = rss_mib(daemon.pid)
    text = (lambda n: "x" * 256) if at_bounds else (lambda n: "x" * (label_kib * 1024))
    held, refused = [], 0
    started = time.time()
    for n in range(sessions):
        f = connect()
        call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION})
        reply, _ = call(f, 1, "session.register", {"pid": n, "label": f"{n} {text(n)}"})
        if "error" in reply:
            refused += 1; f.close(); continue
        withheld = [{"uri": f"file:///w{n}/{i}", "reason": "outside_map"} for i in range(16)]
        call(f, 2, "session.update", {"protocol_version": text(n)[:64] if at_bounds else text(n),
                                      "server": {"name": text(n), "version": text(n)},
                                      "withheld": {"outside_map": 16, "roots": withheld}})
        held.append(f)
    registered = time.time() - started
    listed, pages, longest, after = 0, 0, 0, None
    while True:
        params = {} if after is None else {"after": after}
        reply, length = call(first, 10 + pages, "sessions.list", params)
        pages += 1; longest = max(longest, length)
        page = reply["result"]["sessions"]; listed += len(page)
        if not reply["result"].get("more") or not page: break
        after = page[-1]["id"]
    assert longest <= MAX_LINE, f"a page of {longest} bytes"
    assert listed == len(held), f"listed {listed} of {len(held)}"
    print(f"{len(held)} sessions held ({refused} refused), texts of {'the bounds' if at_bounds else f'{label_kib} KiB each'}, registered in {registered:.1f} s; "
          f"RSS {baseline} -> {rss_mib(daemon.pid)} MiB; sessions.list: {pages} pages, the longest {longest} bytes")
finally:
    daemon.terminate(); daemon.wait()
    shutil.rmtree(base, ignore_errors=True)
