#!/usr/bin/env bash
# Builds the Debian package (scripts/package.sh) and checks it as an installer would see it:
# its metadata and file list, the unit file, the man pages and completions, then unpacks it
# into an empty directory and starts the packaged daemon on the packaged configuration in a
# network namespace of its own, asks it for its version with the packaged client, and stops
# it. Fails on the first thing that is not as it should be.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/package.sh >/dev/null
deb=$(ls -t target/debian/veclane_*.deb | head -1)
fail() { echo "package-check: $*" >&2; exit 1; }

info=$(dpkg-deb --info "$deb")
for want in "Package: veclane" "Section: net" "Depends:" "Description: "; do
  grep -q "$want" <<<"$info" || fail "control lacks '$want'"
done
contents=$(dpkg-deb --contents "$deb" | awk '{print $6}')
for want in ./usr/bin/veclane ./etc/veclane/veclane.toml ./usr/lib/systemd/system/veclane.service \
  ./usr/share/man/man1/veclane.1.gz ./usr/share/man/man1/veclane-run.1.gz ./usr/share/man/man1/veclane-ctl.1.gz \
  ./usr/share/bash-completion/completions/veclane ./usr/share/zsh/vendor-completions/_veclane \
  ./usr/share/fish/vendor_completions.d/veclane.fish ./usr/share/doc/veclane/operations.md \
  ./usr/share/doc/veclane/copyright; do
  grep -qx "$want" <<<"$contents" || fail "no $want in $deb"
done
# The generator and the harness are not in the production binary.
grep -q "veclane-bench.1" <<<"$contents" && fail "the harness's man page is packaged"
dpkg-deb --field "$deb" Conffiles 2>/dev/null | grep -q /etc/veclane/veclane.toml \
  || dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles | grep -q /etc/veclane/veclane.toml \
  || fail "/etc/veclane/veclane.toml is not a conffile"

root=$(mktemp -d)
ns="vlpkg$$"
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
dpkg-deb -x "$deb" "$root"
unit=$root/usr/lib/systemd/system/veclane.service
grep -q '^Type=notify' "$unit" || fail "the unit is not Type=notify"
grep -q '^WatchdogSec=' "$unit" || fail "the unit has no watchdog"
grep -q '^ExecReload=/bin/kill -HUP $MAINPID' "$unit" || fail "the unit cannot reload"
if command -v systemd-analyze >/dev/null 2>&1; then
  # Verified against the unpacked binary: the unit's ExecStart path is rewritten to it.
  sed "s|/usr/bin/veclane|$root/usr/bin/veclane|" "$unit" > "$root/veclane.service"
  out=$(systemd-analyze verify --man=no "$root/veclane.service" 2>&1) \
    || fail "systemd-analyze verify: $out"
  [ -z "$out" ] || fail "systemd-analyze verify warns: $out"
  # The hardening, scored: 6.5 or less (9.7, "UNSAFE", before it; 6.3 now).
  exposure=$(systemd-analyze security --offline=true "$root/veclane.service" 2>&1 | tail -1)
  systemd-analyze security --offline=true --threshold=65 "$root/veclane.service" >/dev/null 2>&1 \
    || fail "the unit's exposure is above 6.5: $exposure"
fi
bash -n "$root/usr/share/bash-completion/completions/veclane" || fail "the bash completion does not parse"
grep -q "ctl" "$root/usr/share/bash-completion/completions/veclane" || fail "the bash completion lacks ctl"
zcat "$root/usr/share/man/man1/veclane-run.1.gz" | grep -q '^\.TH' || fail "veclane-run.1 is not a man page"

"$root/usr/bin/veclane" --version | grep -q '^veclane ' || fail "--version"
"$root/usr/bin/veclane" run --check-config "$root/etc/veclane/veclane.toml" >/dev/null \
  || fail "the packaged configuration does not load"
# Started as the unit would, in a namespace of its own, with what of its hardening can be
# had without systemd: no new privileges, the unit's capability bounding set, its umask.
ip netns add "$ns"
rt=$root/run
caps=$(sed -n 's/^CapabilityBoundingSet=//p' "$unit" | tr '[:upper:]' '[:lower:]' | sed 's/cap_/+/g; s/ /,/g')
[ -n "$caps" ] || fail "the unit has no CapabilityBoundingSet"
umask_=$(sed -n 's/^UMask=//p' "$unit")
ip netns exec "$ns" setpriv --no-new-privs --bounding-set "-all,$caps" \
  sh -c 'umask "$1"; shift; exec "$@"' sh "$umask_" \
  "$root/usr/bin/veclane" run --config "$root/etc/veclane/veclane.toml" \
  --runtime-dir "$rt" --log-format json 2>"$root/log" &
pid=$!
for _ in $(seq 100); do [ -S "$rt/ctl.sock" ] && break; sleep 0.1; done
"$root/usr/bin/veclane" ctl --socket "$rt/ctl.sock" show version | grep -q "veclane" \
  || fail "the packaged daemon does not answer: $(cat "$root/log")"
mode=$(stat -c %a "$rt/ctl.sock")
[ "${mode: -2}" = 00 ] || fail "the control socket is mode $mode: others than root reach it (UMask=$umask_)"
kill -TERM "$pid"
wait "$pid" || fail "the packaged daemon did not stop cleanly: $(cat "$root/log")"
pid=
grep -q '"message":"veclane stopped"' "$root/log" || fail "no stop in the log"
echo "package-check: $deb: $(wc -l <<<"$contents") paths, installed and started: ok"
