#!/usr/bin/env python3
"""What networks cost the daemon: starts `veclane run` (release build) in a scratch runtime
directory, adds N networks (default 4096) over the control API, 16 routes in each one's VRF,
and prints the daemon's resident memory before and after and how long adding and deleting a
network takes. Usage: scripts/vrf-scale.py [N] (after `cargo build --release -p veclane`)."""
import json, socket, subprocess, sys, time, os
import tempfile
d = tempfile.mkdtemp(prefix="veclane-vrf-")
n = int(sys.argv[1]) if len(sys.argv) > 1 else 4096
conf = os.path.join(d, "c.toml")
open(conf, "w").write('[daemon]\nmode = "interrupt"\nbuffers = 4096\n')
p = subprocess.Popen([os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "release", "veclane"), "run", "--config", conf, "--runtime-dir", d], stderr=subprocess.DEVNULL)
for _ in range(200):
    if os.path.exists(d + "/ctl.sock"): break
    time.sleep(0.05)
s = socket.socket(socket.AF_UNIX); s.connect(d + "/ctl.sock"); f = s.makefile("rw")
def call(r):
    f.write(json.dumps(r) + "\n"); f.flush()
    rep = json.loads(f.readline())
    assert rep["reply"] != "error", (r, rep)
    return rep
def rss():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS"): return int(l.split()[1])
base = rss()
t0 = time.time(); add_times = []
for k in range(n):
    a = time.perf_counter()
    call({"request": "network_add", "name": f"n{k}", "vni": k + 1, "ranges": [f"10.{k // 256}.{k % 256}.0/24"]})
    add_times.append(time.perf_counter() - a)
nets = {x["name"]: x["table"] for x in call({"request": "show_network"})["networks"]}
for k in range(n):
    t = nets[f"n{k}"]
    for r in range(16):
        call({"request": "ip_route", "add": True, "route": {"prefix": f"172.{16 + r}.{k % 256}.0/24", "via": "drop", "table": t}})
built = time.time() - t0
after = rss()
del_times = []
for k in range(0, n, 16):
    a = time.perf_counter()
    call({"request": "network_del", "name": f"n{k}"})
    del_times.append(time.perf_counter() - a)
add_times.sort(); del_times.sort()
print(f"{n} networks x 16 routes: daemon RSS {base/1024:.1f} MiB -> {after/1024:.1f} MiB (+{(after-base)/n:.1f} KiB per network); built in {built:.1f} s over the API; network add median {add_times[len(add_times)//2]*1e3:.3f} ms, p99 {add_times[int(len(add_times)*0.99)]*1e3:.3f} ms; network del (with its 16 routes) median {del_times[len(del_times)//2]*1e3:.3f} ms, max {del_times[-1]*1e3:.3f} ms")
p.terminate(); p.wait()
