#!/usr/bin/env python3
"""Publications (docs/RELIABILITY.md, "Workspaces", issue 16 item 7): SESSIONS sessions (default
24, as the attack did) each publish ROOTS roots (default 1,024) with NAME_BYTES-byte names into
one workspace that a watcher and a session that publishes nothing follow; counts publications
taken and refused, checks that every line the followers receive fits the 1 MiB line, and prints
the daemon's RSS and the roots.list answer's size. `--fill` then gives each of the 256 workspaces
allowed a list at its bound (4,096 roots, under 512 KiB), for the roots held at their largest.

    scripts/reliability/publications.py [SESSIONS] [ROOTS] [NAME_BYTES] [--fill]
    (ROOTSD=path/to/rootsd; default: the release build)
"""
import json, os, socket, subprocess, sys, tempfile, time, shutil

PROTOCOL_VERSION = 2
MAX_LINE = 1 << 20
BIN = os.environ.get("ROOTSD", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../target/release/rootsd"))
args = [a for a in sys.argv[1:] if not a.startswith("--")]
sessions = int(args[0]) if args else 24
roots = int(args[1]) if len(args) > 1 else 1024
name_bytes = int(args[2]) if len(args) > 2 else 400
base = tempfile.mkdtemp(prefix="rootsd-publications-")
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
            s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rwb")
            call(f, 0, "hello", {"protocol_version": PROTOCOL_VERSION}); return f
        except OSError: time.sleep(0.01)
    raise SystemExit("rootsd did not start")

def call(f, i, method, params, pushes=None):
    f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode()); f.flush()
    while True:
        line = f.readline()
        if pushes is not None: pushes.append(len(line))
        message = json.loads(line)
        if message.get("id") == i:
            return message, len(line)

try:
    control = connect()
    baseline = rss_mib(daemon.pid)
    watcher = connect(); call(watcher, 1, "watch", {"workspace": "default"})
    follower = connect(); call(follower, 1, "session.register", {"pid": 1, "label": "follower"})
    taken, refused, publishers = 0, 0, []
    for n in range(sessions):
        f = connect()
        call(f, 1, "session.register", {"pid": n, "label": f"publisher {n}"})
        listed = [{"uri": f"file:///s{n}/{i}", "name": f"{i}" + "n" * name_bytes} for i in range(roots)]
        reply, _ = call(f, 2, "session.publish", {"roots": listed})
        if "error" in reply: refused += 1
        else: taken += 1
        publishers.append(f)
    longest_push = 0
    for f in (watcher, follower):
        lines = []
        call(f, 99, "status", {}, pushes=lines)
        longest_push = max([longest_push] + lines)
    _, listing = call(control, 5, "roots.list", {})
    assert listing <= MAX_LINE and longest_push <= MAX_LINE
    print(f"{sessions} sessions x {roots} roots of {name_bytes}-byte names: {taken} publications taken, {refused} refused; "
          f"roots.list {listing} bytes, longest push {longest_push} bytes; RSS {baseline} -> {rss_mib(daemon.pid)} MiB")
    if "--fill" in sys.argv:
        started = time.time(); filled = 0
        for w in range(300):
            listed = [{"uri": f"file:///fill{w}/{i:04}", "name": "n" * 50} for i in range(4096)]
            reply, _ = call(control, 1000 + w, "roots.add", {"workspace": f"w{w}", "roots": listed})
            if "error" in reply:
                # Past the byte bound, or past the 256 workspaces: the change is refused whole.
                listed = listed[:3000]
                reply, _ = call(control, 2000 + w, "roots.add", {"workspace": f"w{w}", "roots": listed})
                if "error" in reply:
                    print(f"workspace {w}: {reply['error']['message'][:120]}"); break
            filled += 1
        print(f"filled {filled} workspaces in {time.time() - started:.1f} s; RSS {rss_mib(daemon.pid)} MiB")
finally:
    daemon.terminate(); daemon.wait()
    shutil.rmtree(base, ignore_errors=True)
