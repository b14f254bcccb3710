# shellcheck shell=bash
# veclane as the one-node cluster's pod network: sourced by scripts/k8s-up.sh (VECLANE_K8S_CNI=
# veclane) after scripts/k8s-env.sh, and by scripts/k8s-smoke.sh for veclane_nad. Never run.
#
# - The daemon (VECLANE_BIN, default target/release/veclane; interrupt mode: it sleeps while
#   nothing moves), with no network of its own: the node agent makes them.
# - The networks are Network resources (docs/k8s/network-crd.yaml), applied once the API
#   server answers (veclane_networks): `pods` on the cluster's pod CIDR (pods route everything
#   through it: podRoutes 0.0.0.0/0) and two secondary networks, `blue` (VNI 2, 10.1.0.0/16)
#   and `red` (VNI 3, 10.2.0.0/16). The agent's controller copies them into etcd, and the agent
#   makes them in the daemon. One node: no uplink (--uplink none), no tunnel.
# - The node's side of `pods`: the agent's node link (--node-link pods), a tap `vl-host` in
#   the host's namespace, link-local on both sides as a pod's gateway is: the host routes the
#   pod CIDR through 169.254.1.1 (veclane's side), veclane routes the node's address through
#   169.254.1.2 (the host's), so pods reach the node (and the API server behind the
#   `kubernetes` Service) and the node its pods. The agent makes it again after a restart.
# - CNI: Multus first (containerd takes the first file), its delegate for eth0 veclane-cni on
#   `pods` (a tap, addresses from veclane-ipam in the node's /24, the default route through
#   veclane); the networks a pod's k8s.v1.cni.cncf.io/networks annotation names come from
#   NetworkAttachmentDefinitions (their CRD applied here; veclane_nad writes one).
#   Addresses and attachments go to this cluster's etcd, on loopback, under veclane's prefixes.

# veclane_plugin NETWORK RANGE [ROUTE] [KIND]: veclane-cni's configuration for NETWORK,
# addresses from RANGE, the pod routed to ROUTE too (besides RANGE) when given, its interface
# a KIND (tap, the default, or memif).
veclane_plugin() {
  local routes="" kind=${4:-tap}
  [ -z "${3:-}" ] || routes="\"routes\": [{ \"dst\": \"$3\" }],"
  cat <<JSON
{
  "type": "veclane-cni",
  "network_name": "$1",
  "interface": { "kind": "$kind", "mtu": 1500 },
  "ctl_socket": "$K8S_VECLANE_RUN/ctl.sock",
  "etcd_endpoints": ["http://127.0.0.1:$K8S_ETCD_PORT"],
  "ipam": {
    "type": "veclane-ipam",
    "network_name": "$1",
    "range": "$2",
    $routes
    "etcd_endpoints": ["http://127.0.0.1:$K8S_ETCD_PORT"]
  }
}
JSON
}

# veclane_nad NAME NETWORK RANGE [KIND]: a NetworkAttachmentDefinition NAME for veclane's
# NETWORK, its interfaces KIND (tap or memif).
veclane_nad() {
  local conf
  conf=$(veclane_plugin "$2" "$3" "" "${4:-tap}" | sed 's/^/          /')
  cat <<YAML
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata:
  name: $1
spec:
  config: |
    {
      "cniVersion": "1.0.0",
      "name": "$1",
      "plugins": [
$conf
      ]
    }
YAML
}

# veclane_network NAME VNI RANGE [POD_ROUTE]: a Network resource.
veclane_network() {
  cat <<YAML
apiVersion: veclane.dev/v1alpha1
kind: Network
metadata: {name: $1}
spec:
  vni: $2
  range: $3
YAML
  [ -z "${4:-}" ] || echo "  podRoutes: [$4]"
}

# veclane_networks: the Network CRD and the cluster's three networks (once the API server
# answers, before the agent starts).
veclane_networks() {
  kubectl apply -f docs/k8s/network-crd.yaml >/dev/null
  kubectl wait --for condition=established crd/networks.veclane.dev --timeout=30s >/dev/null
  { veclane_network pods 1 "$K8S_POD_CIDR" 0.0.0.0/0; echo ---
    veclane_network blue 2 10.1.0.0/16; echo ---
    veclane_network red 3 10.2.0.0/16; } | kubectl apply -f - >/dev/null
}

# veclane_pod_network: starts the daemon and writes the CNI configuration. Called by
# k8s-up.sh before containerd starts.
veclane_pod_network() {
  local vbin cnibin=target/cni pod_subnet f p
  vbin=$(realpath "${VECLANE_BIN:-target/release/veclane}" 2>/dev/null) || vbin=""
  for f in "$vbin" "$cnibin/veclane-cni" "$cnibin/veclane-ipam" "$cnibin/veclane-agent" \
    "$K8S_DIR/cni/bin/multus"; do
    if [ -z "$f" ] || [ ! -x "$f" ]; then
      die "${f:-the veclane daemon} is not built (make build; scripts/setup.sh builds target/cni; scripts/build-k8s.sh multus)"
    fi
  done
  pod_subnet="${K8S_POD_CIDR%.*/*}.0/24"
  mkdir -p "$K8S_VECLANE_RUN" "$K8S_DIR/cni/multus"
  printf '[daemon]\nmode = "interrupt"\n' >"$K8S_DIR/veclane.toml"
  k8s_start veclane "$vbin" run --config "$K8S_DIR/veclane.toml" --runtime-dir "$K8S_VECLANE_RUN"
  for _ in $(seq 100); do [ -S "$K8S_VECLANE_RUN/ctl.sock" ] && break; sleep 0.1; done
  [ -S "$K8S_VECLANE_RUN/ctl.sock" ] || die "veclane did not start; see $K8S_LOGS/veclane.log"

  for p in veclane-cni veclane-ipam; do ln -sfn "$(realpath "$cnibin/$p")" "$K8S_DIR/cni/bin/$p"; done
  cat >"$K8S_DIR/cni/net.d/00-multus.conf" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "multus",
  "type": "multus",
  "kubeconfig": "$K8S_ADMIN_KUBECONFIG",
  "cniDir": "$K8S_DIR/cni/multus",
  "binDir": "$K8S_DIR/cni/bin",
  "delegates": [
    {
      "cniVersion": "1.0.0",
      "name": "pods",
      "plugins": [
$(veclane_plugin pods "$pod_subnet" 0.0.0.0/0 | sed 's/^/        /')
      ]
    }
  ]
}
JSON
}

# veclane_agent NODE_IP: starts the node agent (k8s-up.sh, once the API server answers).
veclane_agent() {
  k8s_start veclane-agent "$(realpath target/cni/veclane-agent)" \
    --etcd "http://127.0.0.1:$K8S_ETCD_PORT" --node "$K8S_NODE" --vtep "$1" \
    --uplink none --node-link pods --ctl-socket "$K8S_VECLANE_RUN/ctl.sock" --resync 10s \
    --kubeconfig "$K8S_ADMIN_KUBECONFIG" --default-network pods
}

# veclane_ctl ARGS...: the daemon's control API.
veclane_ctl() {
  "$(realpath "${VECLANE_BIN:-target/release/veclane}")" ctl -s "$K8S_VECLANE_RUN/ctl.sock" "$@"
}

# veclane_linked: whether the daemon holds the node link (the agent made the networks and it).
veclane_linked() { veclane_ctl show interface host >/dev/null 2>&1; }
