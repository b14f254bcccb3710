#!/usr/bin/env bash
# Stops the one-node cluster scripts/k8s-up.sh started and removes what it left on the host:
# its pods (through the CRI, so that the CNI plugins release their addresses and interfaces),
# its processes, the mounts under the state directory, the pod bridge, kubelet's pod cgroups,
# and the state directory itself except logs/. Safe to run twice, and after an up that failed
# half way. `make k8s-down`. Needs root. Usage:
#
#   scripts/k8s-down.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/k8s-env.sh
. scripts/k8s-env.sh

say() { echo "k8s-down: $*" >&2; }
[ "$(id -u)" -eq 0 ] || { echo "k8s-down: needs root" >&2; exit 1; }
[ -d "$K8S_DIR" ] || { say "no cluster in $K8S_DIR"; exit 0; }

bin="${XDG_CACHE_HOME:-$HOME/.cache}/veclane/k8s-$K8S_VERSION/bin"

# kubelet first, or it restarts the pods removed next.
k8s_stop kubelet
if k8s_pid containerd >/dev/null && [ -x "$bin/crictl" ] && [ -f "$K8S_DIR/crictl.yaml" ]; then
  say "removing pods"
  timeout 120 "$bin/crictl" --config "$K8S_DIR/crictl.yaml" rmp -fa >&2 ||
    say "removing pods failed; their processes are killed below"
fi
k8s_stop containerd kube-scheduler kube-controller-manager kube-apiserver
k8s_stop etcd

# Shims outlive containerd by design; ours name our socket.
for d in /proc/[0-9]*; do
  cmd=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
  case "$cmd" in
    *containerd-shim*"-address $K8S_CONTAINERD_SOCK "*) kill -KILL "${d#/proc/}" 2>/dev/null || true ;;
  esac
done
# So do containers whose shim was killed: they are in kubelet's pod cgroups.
if [ -d /sys/fs/cgroup/pids/kubepods ]; then
  find /sys/fs/cgroup/pids/kubepods -name cgroup.procs -exec cat {} + 2>/dev/null |
    while read -r pid; do kill -KILL "$pid" 2>/dev/null || true; done
fi

# Mounts under the state directory (containerd's snapshots and sandbox files, kubelet's
# volumes), deepest first.
mapfile -t mounts < <(awk -v d="$K8S_DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo |
  sort -r)
for m in "${mounts[@]}"; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || say "cannot unmount $m"
done

if ip link show "$K8S_BRIDGE" >/dev/null 2>&1; then
  ip link delete "$K8S_BRIDGE" || say "cannot delete the bridge $K8S_BRIDGE"
fi

# kubelet's cgroups (cgroupfs driver: /kubepods in every v1 hierarchy), leaves first.
for h in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/unified/kubepods; do
  [ -d "$h" ] || continue
  find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || say "cannot remove all of $h"
done

find "$K8S_DIR" -mindepth 1 -maxdepth 1 ! -name logs -exec rm -rf {} +
for ns in /run/netns/cni-*; do
  [ -e "$ns" ] && say "left behind: $ns (another runtime's, or a pod not removed above)"
done
say "stopped; logs kept in $K8S_LOGS"
