# shellcheck shell=bash
# veclane as the one-node cluster's pod network: sourced by scripts/k8s-up.sh (VECLANE_K8S_CNI=
# veclane) after scripts/k8s-env.sh, and by scripts/k8s-smoke.sh for veclane_nad. Never run.
#
# - veclane is docs/k8s/daemonset.yaml (veclane_deploy, once kubelet runs): the daemon and the
#   node agent in one pod on the host's network, the image veclane.local/veclane:dev made
#   from VECLANE_BIN (default target/release/veclane) and target/cni, this cluster's
#   ConfigMaps (veclane_config: interrupt mode, loopback etcd, no uplink), the host paths
#   under the state directory. Its init container installs the CNI plugins and Multus'
#   configuration, so the node turns Ready once veclane is on it.
# - The networks are Network resources (docs/k8s/network-crd.yaml; veclane_networks): `pods`
#   on the cluster's pod CIDR (pods route everything through it: podRoutes 0.0.0.0/0) and two
#   secondary networks, `blue` (VNI 2, 10.1.0.0/16) and `red` (VNI 3, 10.2.0.0/16). The
#   agent's controller copies them into etcd, and the agent makes them in the daemon. One
#   node: no uplink, no tunnel.
# - The node's side of `pods`: the agent's node link (node-link: pods), a tap `vl-host` in
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
  $(veclane_etcd_conf),
  "ipam": {
    "type": "veclane-ipam",
    "network_name": "$1",
    "range": "$2",
    $routes
    $(veclane_etcd_conf)
  }
}
JSON
}

# veclane_etcd_conf: the plugins' etcd settings: the cluster's etcd, veclane's client
# certificate (files on the host, read by the plugins, which run as root).
veclane_etcd_conf() {
  printf '"etcd_endpoints": ["%s"], "etcd_ca_file": "%s", "etcd_cert_file": "%s", "etcd_key_file": "%s"' \
    "$K8S_ETCD_URL" "$K8S_ETCD_PKI/ca.crt" "$K8S_ETCD_PKI/veclane.crt" "$K8S_ETCD_PKI/veclane.key"
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

# veclane_bin: the daemon binary the image and veclane_ctl use.
veclane_bin() { realpath "${VECLANE_BIN:-target/release/veclane}" 2>/dev/null || echo "${VECLANE_BIN:-target/release/veclane}"; }

# veclane_prepare: checks what the DaemonSet's image is made of (k8s-up.sh imports it once
# containerd runs) and Multus.
veclane_prepare() {
  local f
  for f in "$(veclane_bin)" target/cni/veclane-cni target/cni/veclane-ipam target/cni/veclane-agent \
    "$K8S_DIR/cni/bin/multus"; do
    [ -x "$f" ] || die "$f is not built (make build; scripts/setup.sh builds target/cni; scripts/build-k8s.sh multus)"
  done
  mkdir -p "$K8S_VECLANE_RUN" "$K8S_DIR/cni/multus"
}

# veclane_config NODE_IP: this cluster's two ConfigMaps of docs/k8s/daemonset.yaml and its
# Secret: the daemon in interrupt mode (one worker, sleeping while nothing moves: the machine
# is shared), the agent on loopback etcd with no uplink and the API server's own address; the
# CNI configuration Multus (00-multus.conf, which containerd takes, being first); veclane's
# etcd client certificate (the Secret veclane-etcd).
veclane_config() {
  kubectl create configmap veclane-config -n veclane-system --dry-run=client -o yaml \
    --from-literal=veclane.toml="$(printf '[daemon]\nmode = "interrupt"\n')" \
    --from-literal=etcd-endpoints="$K8S_ETCD_URL" --from-literal=uplink=none \
    --from-literal=default-network=pods --from-literal=node-link=pods \
    --from-literal=kubernetes-service-host="$1" --from-literal=kubernetes-service-port="$K8S_API_PORT"
  echo ---
  kubectl create configmap veclane-cni -n veclane-system --dry-run=client -o yaml \
    --from-literal=00-multus.conf="$(veclane_multus_conf)"
  echo ---
  kubectl create secret generic veclane-etcd -n veclane-system --dry-run=client -o yaml \
    --from-file=ca.crt="$K8S_ETCD_PKI/ca.crt" --from-file=client.crt="$K8S_ETCD_PKI/veclane.crt" \
    --from-file=client.key="$K8S_ETCD_PKI/veclane.key"
}

# veclane_multus_conf: Multus' configuration, its delegate for eth0 veclane-cni on `pods` (a
# tap, addresses from veclane-ipam in the node's /24, the default route through veclane).
veclane_multus_conf() {
  cat <<JSON
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
$(veclane_plugin pods "${K8S_POD_CIDR%.*/*}.0/24" 0.0.0.0/0 | sed 's/^/        /')
      ]
    }
  ]
}
JSON
}

# veclane_deploy NODE_IP: veclane on the cluster, once kubelet runs: the CRDs (NADs,
# MultiNetworkPolicies, Networks), the three networks, this cluster's ConfigMaps, and
# docs/k8s/daemonset.yaml (but for its example ConfigMaps) with the host paths made this
# cluster's. The DaemonSet's init container installs the CNI plugins and configuration: the
# node turns Ready once veclane is on it.
veclane_deploy() {
  kubectl apply -f docs/k8s/nad-crd.yaml -f docs/k8s/mnp-crd.yaml >/dev/null
  veclane_networks
  kubectl create namespace veclane-system --dry-run=client -o yaml | kubectl apply -f - >/dev/null
  veclane_config "$1" | kubectl apply -f - >/dev/null
  awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\nkind: ConfigMap\n/' docs/k8s/daemonset.yaml |
    sed -E -e "s#([{ ]path: )/run/veclane#\1$K8S_VECLANE_RUN#" \
      -e "s#([{ ]path: )/opt/cni/bin#\1$K8S_DIR/cni/bin#" \
      -e "s#([{ ]path: )/etc/cni/net.d#\1$K8S_DIR/cni/net.d#" |
    kubectl apply -f - >/dev/null
}

# veclane_pod_ready: whether the DaemonSet's pod runs and is ready.
veclane_pod_ready() {
  kubectl -n veclane-system wait --for=condition=Ready pod -l app=veclane --timeout=2s >/dev/null 2>&1
}

# veclane_ctl ARGS...: the daemon's control API.
veclane_ctl() { "$(veclane_bin)" ctl -s "$K8S_VECLANE_RUN/ctl.sock" "$@"; }

# veclane_linked: whether the daemon holds the node link (the agent made the networks and it).
veclane_linked() { veclane_ctl show interface host >/dev/null 2>&1; }
