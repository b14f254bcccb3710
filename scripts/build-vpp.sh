#!/usr/bin/env bash
# Builds FD.io VPP (the `vpp` peer of `veclane bench`) once per machine, from a source tarball,
# into a cache outside the work tree keyed by the tarball's hash; prints the path of the `vpp`
# binary (`vppctl` beside it; VPP finds its plugins relative to it). Never run by CI: a build
# takes half an hour or more on two cores. Usage:
#
#   scripts/build-vpp.sh [TARBALL]
#
# TARBALL defaults to $VECLANE_VPP_TARBALL, else the newest vpp-*.tar.xz in ../shared/vpp next
# to the repository (where this project's machines keep it: no package registry has VPP).
# The cache is ${XDG_CACHE_HOME:-~/.cache}/veclane/vpp-<first 16 hex digits of the tarball's
# SHA-256>; a finished build leaves a `done` stamp there and is not redone. Installs the Debian
# packages the build lacks (needs root or sudo then).
#
# What the build does, and why (VPP 25.10 on Debian 12):
# - CMake on src/ directly with Ninja: the top-level Makefile's build-root downloads external
#   dependencies, which these machines cannot.
# - A release build with VPP's default LTO: what users run, so the fair comparison.
# - Only the plugins measured against: memif, ping (ICMP echo, the `ping` CLI), vxlan (multinet),
#   cnat (services: the reference's load balancer) and acl (reflexive ACLs: stateful policy).
# - The tarball has no .git, so the version string goes into src/scripts/.version.
# - gcc 12 stops on src/vppinfra/devicetree.c with -Werror=stringop-truncation (VPP's own
#   -Werror comes after CMAKE_C_FLAGS): a pragma in that file turns the warning off.
# - vppapigen is a `#!/usr/bin/env python3` script that needs ply: /usr/bin comes first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "build-vpp: $*" >&2; exit 1; }
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

tarball=${1:-${VECLANE_VPP_TARBALL:-}}
if [ -z "$tarball" ]; then
  tarball=$(ls -t ../shared/vpp/vpp-*.tar.xz 2>/dev/null | head -n 1 || true)
fi
[ -n "$tarball" ] && [ -f "$tarball" ] ||
  die "no VPP source tarball (pass one, or set VECLANE_VPP_TARBALL)"
tarball=$(realpath "$tarball")

hash=$(sha256sum "$tarball" | cut -c1-16)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/veclane/vpp-$hash"
bin="$cache/build/bin/vpp"
keep="memif ping vxlan cnat acl"
# A build made when fewer plugins were kept is resumed for the missing ones.
have_plugins() {
  local p
  for p in $keep; do
    [ -f "$cache/build/lib/x86_64-linux-gnu/vpp_plugins/${p}_plugin.so" ] || return 1
  done
}
if [ -f "$cache/done" ] && [ -x "$bin" ] && have_plugins; then
  echo "$bin"
  exit 0
fi

pkgs=()
for p in cmake ninja-build python3-ply python3-jsonschema python3-yaml libunwind-dev \
  libnuma-dev libiberty-dev libssl-dev pkg-config gcc g++ make xz-utils; do
  dpkg -s "$p" >/dev/null 2>&1 || pkgs+=("$p")
done
if [ "${#pkgs[@]}" -gt 0 ]; then
  echo "build-vpp: installing ${pkgs[*]}" >&2
  as_root apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q --no-install-recommends "${pkgs[@]}" >&2
fi

# An interrupted build (a build takes long enough to be cut off) resumes: the unpacked and
# patched tree is kept behind its own stamp, and ninja picks up where it stopped.
src="$cache/src/src"
if [ ! -f "$cache/unpacked" ]; then
  rm -rf "$cache"
  mkdir -p "$cache/src"
  echo "build-vpp: unpacking $tarball into $cache" >&2
  tar -xJf "$tarball" -C "$cache/src" --strip-components=1
  [ -f "$src/CMakeLists.txt" ] || die "$tarball holds no VPP source tree (no src/CMakeLists.txt)"
  # The version: the tarball's name says it (vpp-25.10-rc0-13-gc0513c19d.tar.xz).
  version=$(basename "$tarball" .tar.xz)
  version=${version#vpp-}
  echo "$version" >"$src/scripts/.version"
  sed -i '1i #pragma GCC diagnostic ignored "-Wstringop-truncation"' "$src/vppinfra/devicetree.c"
  touch "$cache/unpacked"
else
  echo "build-vpp: resuming the build in $cache" >&2
fi

excluded=()
for d in "$src"/plugins/*/; do
  name=$(basename "$d")
  case " $keep " in *" $name "*) ;; *) excluded+=("$name") ;; esac
done
excluded_list=$(IFS=';'; echo "${excluded[*]}")

export PATH="/usr/bin:$PATH"
echo "build-vpp: configuring (release, LTO, plugins: $keep)" >&2
cmake -G Ninja -S "$src" -B "$cache/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DPython3_EXECUTABLE=/usr/bin/python3 \
  -DVPP_EXCLUDED_PLUGINS="$excluded_list" >"$cache/configure.log" 2>&1 ||
  die "cmake failed; see $cache/configure.log"
echo "build-vpp: building (this takes a while; log in $cache/build.log)" >&2
ninja -C "$cache/build" -j "$(nproc)" vpp vppctl memif_plugin ping_plugin vxlan_plugin cnat_plugin acl_plugin \
  >"$cache/build.log" 2>&1 || die "build failed; see $cache/build.log"
[ -x "$bin" ] || die "the build produced no $bin"
[ -x "$cache/build/bin/vppctl" ] || die "the build produced no vppctl"
echo "$tarball" >"$cache/done"
echo "$bin"
