#!/usr/bin/env bash
# Installs what a fresh machine lacks, and nothing it already has. Idempotent; safe to run
# before every `make` target. Needs root (or sudo) only when a Debian package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages: DPDK (testpmd with net_memif) is the reference peer in tests and benchmarks.
pkgs=()
command -v dpdk-testpmd >/dev/null 2>&1 || pkgs+=(dpdk)
dpkg -s dpdk-dev >/dev/null 2>&1 || pkgs+=(dpdk-dev)
dpkg -s librte-net-memif23 >/dev/null 2>&1 || pkgs+=(librte-net-memif23)
# testpmd's default mbuf pool ops (ring_mp_mc) live in a driver that dpdk only Recommends.
dpkg -s librte-mempool-ring23 >/dev/null 2>&1 || pkgs+=(librte-mempool-ring23)
# DPDK's l3fwd example (a benchmark DUT) is built from the source dpdk-doc ships, against
# libdpdk-dev (dpdk-dev depends on it), with cc, make and pkg-config.
dpkg -s dpdk-doc >/dev/null 2>&1 || pkgs+=(dpdk-doc)
command -v cc >/dev/null 2>&1 || pkgs+=(gcc)
command -v make >/dev/null 2>&1 || pkgs+=(make)
command -v pkg-config >/dev/null 2>&1 || pkgs+=(pkg-config)
# tshark: the independent parser the daemon tests check forwarded packets (pcap) with.
command -v tshark >/dev/null 2>&1 || pkgs+=(tshark)
# iproute2 (network namespaces, veth, bridges, the kernel's VXLAN) and ping: the kernel
# tests of the uplinks and of VXLAN against a Linux VTEP.
command -v ip >/dev/null 2>&1 || pkgs+=(iproute2)
command -v ping >/dev/null 2>&1 || pkgs+=(iputils-ping)
# python3: the memif hostile tests play a second process (a peer with its own pid) with it.
command -v python3 >/dev/null 2>&1 || pkgs+=(python3)
# callgrind: `veclane bench l3fwd --cost` (instructions per packet).
command -v valgrind >/dev/null 2>&1 || pkgs+=(valgrind)
# <linux/idxd.h>: the DSA formats are checked against the kernel's header, compiled by cc.
[ -f /usr/include/linux/idxd.h ] || pkgs+=(linux-libc-dev)
# etcd: the cluster's store; the tests of cni/ start their own server on loopback.
command -v etcd >/dev/null 2>&1 || pkgs+=(etcd-server)
# curl scrapes the metrics endpoint and tmux is the terminal `veclane ctl monitor` is
# checked on, in the operations tests.
command -v curl >/dev/null 2>&1 || pkgs+=(curl)
command -v tmux >/dev/null 2>&1 || pkgs+=(tmux)
# iperf3: the ordinary program in the pods of `veclane bench pods` (TCP and UDP).
command -v iperf3 >/dev/null 2>&1 || pkgs+=(iperf3)
# ethtool: the pods' offloads, turned off on the veth candidate path of `bench pods`.
command -v ethtool >/dev/null 2>&1 || pkgs+=(ethtool)
if [ "${#pkgs[@]}" -gt 0 ]; then
  # wireshark-common asks whether non-root users may capture; the answer does not matter here.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | as_root debconf-set-selections 2>/dev/null || true
  echo "setup: installing ${pkgs[*]}"
  as_root apt-get update -q
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${pkgs[@]}"
fi

# dpdk-l3fwd (target/dpdk-l3fwd/dpdk-l3fwd); does nothing when it is already up to date.
scripts/build-dpdk-l3fwd.sh >/dev/null

# Rust: rust-toolchain.toml pins the toolchain; this makes rustup fetch it if absent.
rustup show active-toolchain >/dev/null

# Go interop peer (gomemif v0.1.0 as memif primary), built from the committed go.sum.
if command -v go >/dev/null 2>&1; then
  mkdir -p target/interop
  (cd interop/gomemif-peer && go build -o ../../target/interop/gomemif-peer .)
  # The control plane (etcd client and the rest, from the committed go.sum): the node agent,
  # the CNI plugins (target/cni is a CNI_PATH), cnitool at the version cni/go.mod pins, and
  # the connectivity matrix scripts/k8s-smoke.sh checks a cluster with.
  mkdir -p target/cni
  (cd cni && go build -o ../target/cni/veclane-agent ./cmd/veclane-agent \
    && go build -o ../target/cni/veclane-ipam ./cmd/veclane-ipam \
    && go build -o ../target/cni/veclane-cni ./cmd/veclane-cni \
    && go build -o ../target/cni/cnitool github.com/containernetworking/cni/cnitool \
    && go build -o ../target/cni/netpol-matrix ./e2e/matrix)
else
  echo "setup: go not found; the gomemif interop test will fail" >&2
fi

# cargo-deb: `make package` and the package check in `make test`.
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb

# Fuzzing (make fuzz, and the short fuzz smoke in make test): nightly + cargo-fuzz.
if [ "${VECLANE_SETUP_FUZZ:-1}" = 1 ]; then
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
fi
