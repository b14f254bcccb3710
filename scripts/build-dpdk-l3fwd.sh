#!/usr/bin/env bash
# Builds DPDK's l3fwd example (the `dpdk-l3fwd` DUT of `veclane bench l3fwd`) from the source
# Debian ships in dpdk-doc, against the installed libdpdk-dev. Installs nothing (setup.sh does);
# never vendors the source. Usage: scripts/build-dpdk-l3fwd.sh [OUTDIR] (default: the
# repository's target/dpdk-l3fwd); prints the binary's path, OUTDIR/dpdk-l3fwd. Idempotent:
# does nothing when the binary is newer than the example's sources, libdpdk's pkg-config file
# and this script.
#
# One change is applied to the copied source: l3fwd asks every port for the Rx checksum
# offloads (port_conf.rxmode.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM), which net_memif does not
# offer, so rte_eth_dev_configure would fail. The patch masks the requested Rx offloads with the
# device's capabilities, where the port is configured and where its Rx queues are set up (two
# lines). l3fwd never reads the checksum flags those offloads set (its RFC 1812 checks leave the
# IPv4 header checksum "to hardware"), so the change only lets the port start; it also means
# l3fwd forwards frames with a bad IPv4 checksum, where veclane and VPP drop them.
set -euo pipefail
out=${1:-}
case "$out" in "" | /*) ;; *) out="$(pwd)/$out" ;; esac
cd "$(dirname "$0")/.."
out=${out:-target/dpdk-l3fwd}
examples=${DPDK_EXAMPLES:-/usr/share/dpdk/examples}
bin="$out/dpdk-l3fwd"
self="$(pwd)/scripts/build-dpdk-l3fwd.sh"

die() { echo "build-dpdk-l3fwd: $*" >&2; exit 1; }

# The example's source: plain or gzip-compressed files (Debian compresses some docs).
src="$examples/l3fwd"
[ -e "$src/main.c" ] || [ -e "$src/main.c.gz" ] ||
  die "DPDK's l3fwd example source is missing ($src/main.c); install Debian's dpdk-doc package (scripts/setup.sh does)"
[ -d "$examples/common" ] ||
  die "DPDK's examples/common headers are missing ($examples/common); install dpdk-doc"
command -v pkg-config >/dev/null 2>&1 || die "pkg-config not found; install pkg-config"
pkg-config --exists libdpdk ||
  die "libdpdk not found by pkg-config; install Debian's libdpdk-dev package (scripts/setup.sh does)"
command -v "${CC:-cc}" >/dev/null 2>&1 || die "no C compiler (${CC:-cc}); install gcc"
command -v make >/dev/null 2>&1 || die "make not found; install make"
pc=$(pkg-config --path libdpdk)

if [ -x "$bin" ] &&
  [ -z "$(find "$src" "$examples/common" "$pc" "$self" -newer "$bin" -print -quit)" ]; then
  echo "$bin"
  exit 0
fi

build="$out/src"
rm -rf "$build"
mkdir -p "$build"
# The Makefile includes ../common, so keep the layout: $build/l3fwd and $build/common.
cp -r "$src" "$build/l3fwd"
cp -r "$examples/common" "$build/common"
find "$build" -name '*.gz' -exec gunzip -f {} +

main="$build/l3fwd/main.c"
rx_port='		if (dev_info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)'
rx_queue='			rxq_conf.offloads = port_conf.rxmode.offloads;'
for anchor in "$rx_port" "$rx_queue"; do
  n=$(grep -cxF -- "$anchor" "$main" || true)
  [ "$n" = 1 ] || die "upstream l3fwd changed shape: expected the line '${anchor#"${anchor%%[![:space:]]*}"}' once in main.c, found it $n times; update the offload patch in $0"
done
# Port level: mask what rte_eth_dev_configure is asked for (inserted before the fast-free check,
# after rte_eth_dev_info_get and config_port_max_pkt_len).
sed -i "s/^${rx_port}\$/\t\tlocal_port_conf.rxmode.offloads \&= dev_info.rx_offload_capa; \/* veclane: net_memif has no Rx checksum offload *\/\n&/" "$main"
# Queue level: rte_eth_rx_queue_setup refuses queue offloads the device lacks, and l3fwd takes
# them from the unmasked global port_conf.
sed -i "s/^${rx_queue}\$/\t\t\trxq_conf.offloads = port_conf.rxmode.offloads \& dev_info.rx_offload_capa; \/* veclane *\//" "$main"
grep -qF 'local_port_conf.rxmode.offloads &= dev_info.rx_offload_capa;' "$main" &&
  grep -qF 'rxq_conf.offloads = port_conf.rxmode.offloads & dev_info.rx_offload_capa;' "$main" &&
  [ "$(grep -c 'veclane' "$main")" = 2 ] ||
  die "the offload patch did not apply to $main"

make -s -C "$build/l3fwd" shared >&2
cp "$build/l3fwd/build/l3fwd-shared" "$bin.tmp"
mv "$bin.tmp" "$bin"
echo "$bin"
