#!/usr/bin/env bash
# Brings up a one-node Kubernetes cluster on this machine as plain processes (no systemd, no
# kubeadm, no registry): etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# containerd and kubelet, everything under one state directory (scripts/k8s-env.sh lists the
# settings). Waits until the node is Ready, then prints how to reach it. `make k8s-up`; undo
# with scripts/k8s-down.sh (`make k8s-down`). Needs root. Usage:
#
#   scripts/k8s-up.sh
#
# Builds Kubernetes first when this machine has not (scripts/build-k8s.sh: ~11 minutes once).
#
# Choices, and why:
# - The root mount is made rshared: these machines boot with it private, and kubelet needs
#   shared propagation for pods that ask for mountPropagation.
# - etcd listens on loopback only, on its own ports (not 2379: the test suite runs etcds there).
# - kube-apiserver makes its own self-signed serving certificate (--cert-dir); a small CA made
#   here signs the client certificates: the admin's (group system:masters), the controller
#   manager's, the scheduler's, kubelet's (system:node:NODE, so the Node authorizer and
#   NodeRestriction apply) and the API server's own for reaching kubelet (exec, logs).
# - containerd gets a config of its own: root, state, socket, CNI bin and conf dirs all under
#   the state directory, so it never meets a system containerd; cgroupfs, as kubelet.
# - The pod network is chosen by VECLANE_K8S_CNI: `bridge` (the default) is Debian's bridge +
#   host-local plugins on the node's pod CIDR; `veclane` is veclane's daemon (VECLANE_BIN,
#   default target/release/veclane) and its CNI plugins from target/cni (docs/kubernetes.md).
# - kubelet: cgroupDriver cgroupfs (no systemd), failSwapOn false, failCgroupV1 false (the
#   default on 1.34, written out because 1.35 flips it), image GC off (our images cannot be
#   pulled back), eviction thresholds low (a build machine's disk is often fuller than 90%).
# - No kube-proxy and no cluster DNS: services are veclane's job, later.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/k8s-env.sh
. scripts/k8s-env.sh
# shellcheck source=scripts/k8s-veclane.sh
. scripts/k8s-veclane.sh

die() { echo "k8s-up: $*" >&2; exit 1; }
say() { echo "k8s-up: $*" >&2; }
[ "$(id -u)" -eq 0 ] || die "needs root (kubelet, containerd and the CNI plugins do)"

t0=$(date +%s)
bin=$(scripts/build-k8s.sh "$K8S_VERSION")
node_ip=$(k8s_node_ip)
[ -n "$node_ip" ] || die "no node address (no default route?); set VECLANE_K8S_NODE_IP"
for c in "${K8S_COMPONENTS[@]}"; do
  if k8s_pid "$c" >/dev/null; then
    die "$c of a cluster in $K8S_DIR still runs; scripts/k8s-down.sh first"
  fi
done
mkdir -p "$K8S_RUN" "$K8S_LOGS" "$K8S_PKI" "$K8S_DIR/kubeconfig" "$K8S_DIR/containerd" \
  "$K8S_DIR/kubelet" "$K8S_DIR/cni/bin" "$K8S_DIR/cni/net.d" "$K8S_DIR/etcd"
chmod 700 "$K8S_PKI" "$K8S_DIR/etcd"
mount --make-rshared /

# wait_for WHAT SECONDS COMMAND...: polls COMMAND every half second.
wait_for() {
  local what=$1 secs=$2 i
  shift 2
  for i in $(seq 1 $((secs * 2))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  die "$what not up after $secs s; see $K8S_LOGS"
}

# --- certificates and kubeconfigs ---------------------------------------------------------
# issue NAME CN [O]: a client certificate signed by the cluster CA.
issue() {
  local name=$1 cn=$2 org=${3:-} subj
  subj="/CN=$cn"
  [ -z "$org" ] || subj="/O=$org$subj"
  [ -f "$K8S_PKI/$name.crt" ] && return 0
  openssl req -new -newkey rsa:2048 -nodes -keyout "$K8S_PKI/$name.key" -subj "$subj" \
    -out "$K8S_PKI/$name.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n' \
    >"$K8S_PKI/$name.ext"
  openssl x509 -req -in "$K8S_PKI/$name.csr" -CA "$K8S_PKI/ca.crt" -CAkey "$K8S_PKI/ca.key" \
    -CAcreateserial -days 365 -extfile "$K8S_PKI/$name.ext" -out "$K8S_PKI/$name.crt" 2>/dev/null
  rm -f "$K8S_PKI/$name.csr" "$K8S_PKI/$name.ext"
}

# kubeconfig NAME: $K8S_DIR/kubeconfig/NAME.conf with the client certificate NAME.
kubeconfig() {
  local name=$1
  cat >"$K8S_DIR/kubeconfig/$name.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: veclane-k8s
  cluster:
    server: https://$node_ip:$K8S_API_PORT
    certificate-authority: $K8S_PKI/apiserver/apiserver.crt
users:
- name: $name
  user:
    client-certificate: $K8S_PKI/$name.crt
    client-key: $K8S_PKI/$name.key
contexts:
- name: veclane-k8s
  context: {cluster: veclane-k8s, user: $name}
current-context: veclane-k8s
EOF
}

if [ ! -f "$K8S_PKI/ca.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=veclane-k8s-ca" \
    -keyout "$K8S_PKI/ca.key" -out "$K8S_PKI/ca.crt" 2>/dev/null
fi
[ -f "$K8S_PKI/sa.key" ] || openssl genrsa -out "$K8S_PKI/sa.key" 2048 2>/dev/null
openssl rsa -in "$K8S_PKI/sa.key" -pubout -out "$K8S_PKI/sa.pub" 2>/dev/null
# etcd_cert NAME CN client|server: a certificate of etcd's CA (a server one for 127.0.0.1).
etcd_cert() {
  local name=$1 cn=$2 kind=$3 d="$K8S_ETCD_PKI"
  [ -f "$d/$name.crt" ] && return 0
  openssl req -new -newkey rsa:2048 -nodes -keyout "$d/$name.key" -subj "/CN=$cn" \
    -out "$d/$name.csr" 2>/dev/null
  if [ "$kind" = server ]; then
    printf 'extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1\n' >"$d/$name.ext"
  else
    printf 'extendedKeyUsage=clientAuth\n' >"$d/$name.ext"
  fi
  openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
    -days 365 -extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
  rm -f "$d/$name.csr" "$d/$name.ext"
}
mkdir -p "$K8S_ETCD_PKI"
if [ ! -f "$K8S_ETCD_PKI/ca.crt" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=veclane-k8s-etcd-ca" \
    -keyout "$K8S_ETCD_PKI/ca.key" -out "$K8S_ETCD_PKI/ca.crt" 2>/dev/null
fi
etcd_cert server etcd server
etcd_cert apiserver kube-apiserver-etcd-client client
etcd_cert veclane veclane client
issue admin kubernetes-admin system:masters
issue controller-manager system:kube-controller-manager
issue scheduler system:kube-scheduler
issue kubelet "system:node:$K8S_NODE" system:nodes
issue apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
for k in admin controller-manager scheduler kubelet; do kubeconfig "$k"; done

# --- etcd and the control plane -------------------------------------------------------------
# TLS with client certificates of its own CA: no pod (nor any local user without the keys,
# which only root reads) reads or writes the cluster's state.
say "starting etcd on $K8S_ETCD_URL (TLS, client certificates)"
k8s_start etcd etcd --name veclane-k8s --data-dir "$K8S_DIR/etcd" \
  --listen-client-urls "$K8S_ETCD_URL" --advertise-client-urls "$K8S_ETCD_URL" \
  --cert-file "$K8S_ETCD_PKI/server.crt" --key-file "$K8S_ETCD_PKI/server.key" \
  --client-cert-auth --trusted-ca-file "$K8S_ETCD_PKI/ca.crt" \
  --listen-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --initial-advertise-peer-urls "http://127.0.0.1:$K8S_ETCD_PEER_PORT" \
  --initial-cluster "veclane-k8s=http://127.0.0.1:$K8S_ETCD_PEER_PORT"
wait_for etcd 30 k8s_etcd_curl /health

say "starting kube-apiserver on $node_ip:$K8S_API_PORT"
k8s_start kube-apiserver "$bin/kube-apiserver" \
  --etcd-servers "$K8S_ETCD_URL" --etcd-cafile "$K8S_ETCD_PKI/ca.crt" \
  --etcd-certfile "$K8S_ETCD_PKI/apiserver.crt" --etcd-keyfile "$K8S_ETCD_PKI/apiserver.key" \
  --advertise-address "$node_ip" --secure-port "$K8S_API_PORT" \
  --cert-dir "$K8S_PKI/apiserver" \
  --client-ca-file "$K8S_PKI/ca.crt" \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
  --allow-privileged \
  --service-cluster-ip-range "$K8S_SERVICE_CIDR" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --service-account-key-file "$K8S_PKI/sa.pub" \
  --service-account-signing-key-file "$K8S_PKI/sa.key" \
  --kubelet-client-certificate "$K8S_PKI/apiserver-kubelet-client.crt" \
  --kubelet-client-key "$K8S_PKI/apiserver-kubelet-client.key"
kubectl() { "$bin/kubectl" --kubeconfig "$K8S_ADMIN_KUBECONFIG" "$@"; }
wait_for kube-apiserver 90 kubectl get --raw /readyz

say "starting kube-controller-manager and kube-scheduler"
cm_conf="$K8S_DIR/kubeconfig/controller-manager.conf"
k8s_start kube-controller-manager "$bin/kube-controller-manager" \
  --kubeconfig "$cm_conf" --authentication-kubeconfig "$cm_conf" \
  --authorization-kubeconfig "$cm_conf" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --service-account-private-key-file "$K8S_PKI/sa.key" --use-service-account-credentials \
  --root-ca-file "$K8S_PKI/apiserver/apiserver.crt" \
  --cluster-signing-cert-file "$K8S_PKI/ca.crt" --cluster-signing-key-file "$K8S_PKI/ca.key" \
  --allocate-node-cidrs --cluster-cidr "$K8S_POD_CIDR" --node-cidr-mask-size 24 \
  --service-cluster-ip-range "$K8S_SERVICE_CIDR"
sched_conf="$K8S_DIR/kubeconfig/scheduler.conf"
k8s_start kube-scheduler "$bin/kube-scheduler" \
  --kubeconfig "$sched_conf" --authentication-kubeconfig "$sched_conf" \
  --authorization-kubeconfig "$sched_conf" \
  --bind-address 127.0.0.1 --leader-elect=false

# --- the node: CNI, containerd, kubelet -------------------------------------------------------
# The CNI plugins containerd runs come from a directory this script fills, so that a later pod
# network (veclane) only has to add its plugin and conflist here.
for p in /usr/lib/cni/*; do ln -sfn "$p" "$K8S_DIR/cni/bin/$(basename "$p")"; done
[ ! -x "$bin/multus" ] || ln -sfn "$bin/multus" "$K8S_DIR/cni/bin/multus"
rm -f "$K8S_DIR"/cni/net.d/*
case "$K8S_CNI" in
  bridge)
    # The node's pod CIDR is the first /24 of the cluster CIDR (the controller manager gives
    # the only node the first one).
    pod_subnet="${K8S_POD_CIDR%.*/*}.0/24"
    cat >"$K8S_DIR/cni/net.d/10-bridge.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "veclane-k8s",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$K8S_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$pod_subnet"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$K8S_DIR/cni/ipam"
      }
    }
  ]
}
EOF
    ;;
  veclane)
    # veclane comes as a DaemonSet once kubelet runs (scripts/k8s-veclane.sh); its image is
    # imported with the others.
    veclane_prepare
    ;;
  *) die "VECLANE_K8S_CNI=$K8S_CNI: 'bridge' or 'veclane'" ;;
esac

# Without CAP_SYS_RESOURCE (these VMs drop it from every process's bounding set) no process may
# lower its oom_score_adj, and runc fails every pod sandbox (containerd asks -998 for pause:
# "failed to update /proc/self/oom_score_adj: Permission denied", reported by kubelet as
# "can't get final child's PID from pipe: EOF"). containerd then clamps scores to its own.
restrict_oom=false
cap_bnd=$(sed -n 's/^CapBnd:[[:space:]]*//p' /proc/self/status)
if [ $(((16#$cap_bnd >> 24) & 1)) -eq 0 ]; then
  restrict_oom=true
  say "no CAP_SYS_RESOURCE here: containerd restricts oom_score_adj to its own"
fi

images=$(scripts/k8s-images.sh)
cat >"$K8S_DIR/containerd/config.toml" <<EOF
version = 2
root = "$K8S_DIR/containerd/root"
state = "$K8S_DIR/containerd/state"
[grpc]
  address = "$K8S_CONTAINERD_SOCK"
[ttrpc]
  address = "$K8S_DIR/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$K8S_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "veclane.local/pause:3.10"
  enable_unprivileged_ports = true
  restrict_oom_score_adj = $restrict_oom
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$K8S_DIR/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$K8S_DIR/cni/bin"
    conf_dir = "$K8S_DIR/cni/net.d"
EOF
say "starting containerd ($K8S_CONTAINERD_SOCK)"
k8s_start containerd containerd --config "$K8S_DIR/containerd/config.toml"
wait_for containerd 30 ctr --address "$K8S_CONTAINERD_SOCK" version
printf 'runtime-endpoint: unix://%s\nimage-endpoint: unix://%s\n' "$K8S_CONTAINERD_SOCK" \
  "$K8S_CONTAINERD_SOCK" >"$K8S_DIR/crictl.yaml"
# With veclane, also its own image (memif pods run `veclane gen` from it).
image_args=()
[ "$K8S_CNI" != veclane ] || image_args=(--veclane "$(veclane_bin)" --cni target/cni)
scripts/k8s-images.sh "${image_args[@]}" --import "$K8S_CONTAINERD_SOCK" >/dev/null 2>"$K8S_LOGS/images.log" ||
  die "importing the images failed; see $K8S_LOGS/images.log"
say "images in $images imported"

cat >"$K8S_DIR/kubelet/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$K8S_CONTAINERD_SOCK
cgroupDriver: cgroupfs
failSwapOn: false
failCgroupV1: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $K8S_PKI/ca.crt}
authorization: {mode: Webhook}
readOnlyPort: 0
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
EOF
say "starting kubelet (node $K8S_NODE, $node_ip)"
k8s_start kubelet "$bin/kubelet" --config "$K8S_DIR/kubelet/config.yaml" \
  --kubeconfig "$K8S_DIR/kubeconfig/kubelet.conf" --root-dir "$K8S_DIR/kubelet" \
  --cert-dir "$K8S_DIR/kubelet/pki" \
  --hostname-override "$K8S_NODE" --node-ip "$node_ip"

if [ "$K8S_CNI" = veclane ]; then
  say "deploying veclane (docs/k8s/daemonset.yaml)"
  veclane_deploy "$node_ip"
fi
node_ready() {
  [ "$(kubectl get node "$K8S_NODE" \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
wait_for "node $K8S_NODE Ready" 180 node_ready
# Pods cannot be created in a namespace before its default service account exists.
wait_for "the default service account" 60 kubectl -n default get serviceaccount default

if [ "$K8S_CNI" = veclane ]; then
  # The agent made the networks from their resources and the node link into `pods`.
  wait_for "veclane's pod" 120 veclane_pod_ready
  wait_for "veclane's node link" 60 veclane_linked
fi

say "cluster up in $(($(date +%s) - t0)) s; logs in $K8S_LOGS"
cat <<EOF
export KUBECONFIG=$K8S_ADMIN_KUBECONFIG
export CRI_CONFIG_FILE=$K8S_DIR/crictl.yaml
export PATH=$bin:\$PATH   # kubectl $K8S_VERSION (Debian's /usr/bin/kubectl is too old), crictl
kubectl get nodes -o wide
EOF
