# shellcheck shell=bash disable=SC2034
# What scripts/k8s-up.sh and scripts/k8s-down.sh share: where the one-node cluster lives, its
# ports and addresses, and how its processes are started and stopped. Sourced, never run.
#
# Every setting can be overridden from the environment:
#   VECLANE_K8S_DIR       state directory: etcd data, certificates, kubeconfigs, containerd's
#                         root and socket, kubelet's root, CNI config, logs (/var/lib/veclane-k8s)
#   VECLANE_K8S_VERSION   the Kubernetes build scripts/build-k8s.sh makes (v1.34.12)
#   VECLANE_K8S_NODE      the node's name (the host name, lower case)
#   VECLANE_K8S_NODE_IP   the address the API server advertises and kubelet reports (the
#                         source address of the default route)
#   VECLANE_K8S_API_PORT  kube-apiserver's port (6443)
#   VECLANE_K8S_ETCD_PORT etcd's client port on loopback (23790; its peer port is this plus 10).
#                         Not 2379, which the test suite's etcds use.
#   VECLANE_K8S_CNI       the pod network: `bridge` (Linux bridge + host-local, the default) or
#                         `veclane` (veclane's daemon and CNI plugin; target/ built first)
#   VECLANE_K8S_SERVICE_CIDR, VECLANE_K8S_POD_CIDR (10.96.0.0/16, 10.244.0.0/16: the node
#                         gets the first /24)

K8S_DIR=${VECLANE_K8S_DIR:-/var/lib/veclane-k8s}
K8S_VERSION=${VECLANE_K8S_VERSION:-v1.34.12}
K8S_NODE=${VECLANE_K8S_NODE:-$(hostname | tr '[:upper:]' '[:lower:]')}
K8S_API_PORT=${VECLANE_K8S_API_PORT:-6443}
K8S_ETCD_PORT=${VECLANE_K8S_ETCD_PORT:-23790}
K8S_ETCD_PEER_PORT=$((K8S_ETCD_PORT + 10))
K8S_CNI=${VECLANE_K8S_CNI:-bridge}
K8S_SERVICE_CIDR=${VECLANE_K8S_SERVICE_CIDR:-10.96.0.0/16}
K8S_POD_CIDR=${VECLANE_K8S_POD_CIDR:-10.244.0.0/16}
# The bridge the `bridge` pod network makes; k8s-down.sh deletes it.
K8S_BRIDGE=vk8s0

K8S_RUN="$K8S_DIR/run"
K8S_LOGS="$K8S_DIR/logs"
K8S_PKI="$K8S_DIR/pki"
# etcd's own CA, its serving certificate and its clients' (the API server's, veclane's): only
# a holder of a client certificate of this CA reads or writes the cluster's state.
K8S_ETCD_PKI="$K8S_PKI/etcd"
K8S_ETCD_URL="https://127.0.0.1:$K8S_ETCD_PORT"
K8S_CONTAINERD_SOCK="$K8S_DIR/containerd/containerd.sock"
K8S_ADMIN_KUBECONFIG="$K8S_DIR/kubeconfig/admin.conf"
# veclane's runtime directory (its control socket) when it is the pod network.
K8S_VECLANE_RUN="$K8S_DIR/veclane"
# The components in the order k8s-up.sh starts them; k8s-down.sh stops them in reverse.
K8S_COMPONENTS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet)

# k8s_etcd_curl PATH [CURL ARGS...]: a request to etcd as veclane's client.
k8s_etcd_curl() {
  local path=$1
  shift
  curl -fsS --cacert "$K8S_ETCD_PKI/ca.crt" --cert "$K8S_ETCD_PKI/veclane.crt" \
    --key "$K8S_ETCD_PKI/veclane.key" "$@" "$K8S_ETCD_URL$path"
}

k8s_node_ip() {
  if [ -n "${VECLANE_K8S_NODE_IP:-}" ]; then
    echo "$VECLANE_K8S_NODE_IP"
  else
    ip -4 route get 192.0.2.255 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -n 1
  fi
}

# k8s_start NAME COMMAND...: runs COMMAND in its own session (it outlives this script and the
# caller's process group), output to $K8S_LOGS/NAME.log, pid in $K8S_RUN/NAME.pid.
k8s_start() {
  local name=$1
  shift
  printf '%s\0' "$@" >"$K8S_RUN/$name.cmd"
  setsid "$@" </dev/null >"$K8S_LOGS/$name.log" 2>&1 &
  echo $! >"$K8S_RUN/$name.pid"
}

# k8s_restart NAME: stops a component k8s_start started and starts it again with the same
# command line (its log goes on).
k8s_restart() {
  local name=$1 args=()
  [ -f "$K8S_RUN/$name.cmd" ] || { echo "k8s_restart: $name was never started" >&2; return 1; }
  mapfile -d '' -t args <"$K8S_RUN/$name.cmd"
  k8s_stop "$name"
  echo "--- restarted $(date -u +%FT%TZ)" >>"$K8S_LOGS/$name.log"
  setsid "${args[@]}" </dev/null >>"$K8S_LOGS/$name.log" 2>&1 &
  echo $! >"$K8S_RUN/$name.pid"
}

# k8s_pid NAME: the pid of a component this cluster started, if it still runs (a stale pid file
# whose number now belongs to another program does not count).
k8s_pid() {
  local pidfile="$K8S_RUN/$1.pid" pid exe
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  exe=$(tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline") || return 1
  case "$exe" in *"$K8S_DIR"*) echo "$pid" ;; *) return 1 ;; esac
}

# k8s_stop NAME...: SIGTERM to each, then SIGKILL to any still running after 15 s. Together,
# because each component takes 1-3 s to shut down.
k8s_stop() {
  local name pid pids=() i alive
  for name in "$@"; do
    if pid=$(k8s_pid "$name"); then
      kill -TERM "$pid" 2>/dev/null || true
      pids+=("$pid")
    fi
    rm -f "$K8S_RUN/$name.pid"
  done
  for i in $(seq 1 170); do
    alive=0
    for pid in "${pids[@]}"; do
      # A zombie has exited; its parent may be a shell that never reaps it.
      grep -qs '^State:[[:space:]]*[^Z]' "/proc/$pid/status" && alive=1
    done
    [ "$alive" -eq 1 ] || break
    if [ "$i" -eq 150 ]; then
      for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    fi
    sleep 0.1
  done
}
