#!/usr/bin/env bash
# Instructions per forwarded packet of the veclane daemon, by function, under callgrind: a
# figure that does not move with the neighbours' load (the harness's --cost mode will replace
# this script).
#
#   scripts/l3fwd-callgrind.sh [single|two] [FRAME_SIZE]     (after: cargo build --release -p veclane)
#
# The daemon runs the embedded default topology with one polling worker under valgrind; the
# loop-mode generator (native, CPU 0) saturates it for 4 s, so every frame is a full vector of
# 256. Instruction counts are divided by the frames memif0/0 received.
set -euo pipefail
COPY=${1:-single}
SIZE=${2:-64}
V=$(cd "$(dirname "$0")/.." && pwd)/target/release/veclane
D=$(mktemp -d)
trap 'kill $DP 2>/dev/null || true; rm -rf "$D"' EXIT
"$V" run --print-default-config | sed -e 's/^mode = .*/mode = "polling"/' -e "s/^copy = .*/copy = \"$COPY\"/" > "$D/c.toml"
valgrind --tool=callgrind --fair-sched=yes --callgrind-out-file="$D/cg.out" \
  "$V" run --config "$D/c.toml" --runtime-dir "$D" 2>/dev/null &
DP=$!
while [ ! -S "$D/ctl.sock" ]; do sleep 0.2; done
"$V" gen --socket "$D/memif.sock" --id 0 --rx-id 1 --duration 4 --size "$SIZE" --cpu 0 --json > "$D/gen.json"
PKTS=$("$V" ctl --socket "$D/ctl.sock" --json show interface memif0/0 | python3 -c 'import json,sys; print(json.load(sys.stdin)["interfaces"][0]["rx_packets"])')
"$V" ctl --socket "$D/ctl.sock" show runtime
kill "$DP"; wait "$DP" 2>/dev/null || true
python3 - "$D/cg.out" "$PKTS" <<'PY'
import collections, re, subprocess, sys
out = subprocess.run(["callgrind_annotate", "--threshold=100", "--auto=no", sys.argv[1]],
                     capture_output=True, text=True).stdout
pk = float(sys.argv[2])
acc = collections.Counter()
for l in out.splitlines():
    m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(.*?)( \[.*\])?$", l)
    if not m or "PROGRAM TOTALS" in l:
        continue
    fn = re.sub(r"<(\w+::)*(\w+) as graph::Node>::", r"\2::", m.group(3))
    acc[fn] += int(m.group(1).replace(",", ""))
print(f"\n{int(pk)} frames; instructions per frame, whole daemon (idle polls included):")
for fn, n in acc.most_common(15):
    print(f"{n / pk:8.1f}  {fn[:100]}")
print(f"{sum(acc.values()) / pk:8.1f}  total")
PY
