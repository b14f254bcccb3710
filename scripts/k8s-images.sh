#!/usr/bin/env bash
# Makes the container images the one-node cluster (scripts/k8s-up.sh) runs, without a registry:
# docker-archive tarballs that `ctr -n k8s.io images import` loads. Prints the directory that
# holds them. Usage:
#
#   scripts/k8s-images.sh [--veclane BIN --cni DIR] [--import SOCKET]
#
# The directory is ${XDG_CACHE_HOME:-~/.cache}/veclane/k8s-images; each tarball is made once,
# but for the veclane image, made again on every --veclane (it is the build's). With --import,
# also loads them into the containerd listening on SOCKET (namespace k8s.io, the one the CRI
# plugin reads).
#
# The images, and why:
# - $PAUSE_IMAGE: the sandbox ("pause") container of every pod. A static C program that sleeps,
#   reaps the zombies of the pod's PID namespace when it is PID 1 there, and exits 0 on SIGTERM or
#   SIGINT, as upstream's does. k8s-up.sh names it as containerd's `sandbox_image`.
# - $BUSYBOX_IMAGE: a shell and coreutils for test pods, from Debian's busybox-static (fetched
#   with `apt-get download` and unpacked here, so the host's own busybox stays as it is).
# - $VECLANE_IMAGE (with --veclane BIN --cni DIR): busybox's files, the veclane binary BIN as
#   /usr/bin/veclane, DIR's veclane-agent as /usr/bin/veclane-agent and its CNI plugins
#   (veclane-cni, veclane-ipam) in /usr/lib/veclane/cni, all stripped, with the shared
#   libraries they link (ldd): the DaemonSet's image (docs/k8s/daemonset.yaml), and the one
#   pods that run `veclane gen` on a memif use.
# Tags are fixed, never :latest, so that kubelet never tries to pull them (pods still say
# imagePullPolicy: Never).
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "k8s-images: $*" >&2; exit 1; }

PAUSE_IMAGE=veclane.local/pause:3.10
BUSYBOX_IMAGE=veclane.local/busybox:1.35.0
VECLANE_IMAGE=veclane.local/veclane:dev

veclane_bin=""
cni_dir=""
socket=""
while [ $# -gt 0 ]; do
  case $1 in
    --veclane) veclane_bin=${2:?--veclane needs the binary}; shift 2 ;;
    --cni) cni_dir=${2:?--cni needs the directory of the CNI binaries}; shift 2 ;;
    --import) socket=${2:?--import needs the containerd socket}; shift 2 ;;
    *) die "unknown argument $1" ;;
  esac
done

dir="${XDG_CACHE_HOME:-$HOME/.cache}/veclane/k8s-images"
mkdir -p "$dir"

# docker_archive TAG ROOTFS OUT CMD...: a one-layer docker-archive tarball of ROOTFS whose
# default command is CMD.
docker_archive() {
  local tag=$1 rootfs=$2 out=$3
  shift 3
  local work layer_sha config config_sha cmd
  work=$(mktemp -d)
  mkdir "$work/layer"
  tar --numeric-owner --owner=0 --group=0 --sort=name --mtime=@0 -C "$rootfs" \
    -cf "$work/layer/layer.tar" .
  layer_sha=$(sha256sum "$work/layer/layer.tar" | cut -d' ' -f1)
  cmd=$(printf '"%s",' "$@")
  config=$(printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Cmd":[%s]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"scripts/k8s-images.sh"}]}' \
    "${cmd%,}" "$layer_sha")
  config_sha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" >"$work/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer/layer.tar"]}]' \
    "$config_sha" "$tag" >"$work/manifest.json"
  tar --numeric-owner --owner=0 --group=0 -C "$work" -cf "$out.tmp" \
    manifest.json "$config_sha.json" layer
  mv "$out.tmp" "$out"
  rm -rf "$work"
}

pause_tar="$dir/pause-${PAUSE_IMAGE##*:}.tar"
if [ ! -f "$pause_tar" ]; then
  work=$(mktemp -d)
  cat >"$work/pause.c" <<'EOF'
/* The pod sandbox: holds the pod's namespaces open, reaps orphans when it is the namespace's
 * PID 1, and exits cleanly when the runtime stops it. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "-v") == 0) {
    puts("pause (veclane) 3.10");
    return 0;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = stop;
  if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGTERM, &sa, NULL) < 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) < 0) return 2;
  for (;;) pause();
}
EOF
  mkdir -p "$work/rootfs"
  gcc -static -O2 -s -Wall -Werror -o "$work/rootfs/pause" "$work/pause.c" ||
    die "compiling pause failed (needs gcc and libc6-dev)"
  docker_archive "$PAUSE_IMAGE" "$work/rootfs" "$pause_tar" /pause
  rm -rf "$work"
fi

busybox_tar="$dir/busybox-${BUSYBOX_IMAGE##*:}.tar"
if [ ! -f "$busybox_tar" ]; then
  work=$(mktemp -d)
  chmod 755 "$work" # apt-get download fetches as _apt
  (cd "$work" && apt-get download -q busybox-static >&2) ||
    die "apt-get download busybox-static failed"
  dpkg-deb -x "$work"/busybox-static_*.deb "$work/deb"
  rootfs="$work/rootfs"
  mkdir -p "$rootfs/bin" "$rootfs/sbin" "$rootfs/usr/bin" "$rootfs/usr/sbin" "$rootfs/tmp" \
    "$rootfs/etc" "$rootfs/root"
  chmod 1777 "$rootfs/tmp"
  cp "$work/deb/bin/busybox" "$rootfs/bin/busybox"
  # Every applet as a symlink where busybox says it lives.
  "$rootfs/bin/busybox" --list-full | while read -r applet; do
    [ "$applet" = bin/busybox ] || [ -e "$rootfs/$applet" ] || ln -s /bin/busybox "$rootfs/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$rootfs/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$rootfs/etc/group"
  docker_archive "$BUSYBOX_IMAGE" "$rootfs" "$busybox_tar" sh
  rm -rf "$work"
fi

tars=("$pause_tar" "$busybox_tar")
if [ -n "$veclane_bin" ]; then
  work=$(mktemp -d)
  rootfs="$work/rootfs"
  mkdir -p "$rootfs/usr/lib/veclane/cni"
  tar -C "$work" -xf "$busybox_tar" layer/layer.tar
  tar -C "$rootfs" -xf "$work/layer/layer.tar"
  for pair in "$veclane_bin:usr/bin/veclane" "$cni_dir/veclane-agent:usr/bin/veclane-agent" \
    "$cni_dir/veclane-cni:usr/lib/veclane/cni/veclane-cni" \
    "$cni_dir/veclane-ipam:usr/lib/veclane/cni/veclane-ipam"; do
    src=${pair%%:*}
    [ -x "$src" ] || die "$src is not an executable (--veclane BIN --cni DIR)"
    strip -o "$rootfs/${pair#*:}" "$src"
    ldd "$src" | awk '/=> \//{print $3} /^\t\//{print $1}' | while read -r lib; do
      mkdir -p "$rootfs$(dirname "$lib")"
      cp -L "$lib" "$rootfs$lib"
    done
  done
  docker_archive "$VECLANE_IMAGE" "$work/rootfs" "$dir/veclane-dev.tar" veclane
  rm -rf "$work"
  tars+=("$dir/veclane-dev.tar")
fi

if [ -n "$socket" ]; then
  for t in "${tars[@]}"; do
    ctr --address "$socket" -n k8s.io images import "$t" >&2 || die "importing $t failed"
  done
fi
echo "$dir"
