#!/usr/bin/env bash
# Checks the one-node cluster scripts/k8s-up.sh started: the node is Ready, two busybox pods
# (our local image, imagePullPolicy: Never) run, `kubectl exec` reaches them, their addresses
# came from the pod network's range, and one pings the other. With veclane as the pod network
# (k8s-up with VECLANE_K8S_CNI=veclane), pods on the secondary network blue reach each other
# and a pod on red none of them, its daemon holds their interfaces (none once the
# pods are deleted), a pod reaches the API server through the `kubernetes` Service, a Service
# reaches smoke-b by its cluster IP, a NetworkPolicy keeps smoke-a out until smoke-a has the
# label it allows, and restarting kubelet, containerd and veclane in turn keeps or restores
# smoke-a's connectivity. Usage:
#
#   scripts/k8s-smoke.sh
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/k8s-env.sh
. scripts/k8s-env.sh

die() { echo "k8s-smoke: $*" >&2; exit 1; }
say() { echo "k8s-smoke: $*" >&2; }
bin="${XDG_CACHE_HOME:-$HOME/.cache}/veclane/k8s-$K8S_VERSION/bin"
kubectl() { "$bin/kubectl" --kubeconfig "$K8S_ADMIN_KUBECONFIG" "$@"; }
[ -f "$K8S_ADMIN_KUBECONFIG" ] || die "no cluster in $K8S_DIR (scripts/k8s-up.sh first)"
# The pod network the cluster was started with.
if [ -f "$K8S_DIR/cni/net.d/00-multus.conf" ]; then K8S_CNI=veclane; fi
# shellcheck source=scripts/k8s-veclane.sh
. scripts/k8s-veclane.sh

kubectl get nodes -o wide
kubectl wait --for=condition=Ready "node/$K8S_NODE" --timeout=10s >/dev/null ||
  die "node $K8S_NODE is not Ready"

# A pod's interfaces as veclane's daemon lists them (when it is the pod network).
veclane_pods() { veclane_ctl show interface | grep -c '^pod-' || true; }

# http_get POD ADDRESS [PORT]: an HTTP GET of http://ADDRESS:PORT/ (80) from POD (busybox nc:
# its wget crashes, statically linked): the reply's last line, or nothing.
http_get() {
  kubectl exec "$1" -- sh -c "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 $2 ${3:-80}" 2>/dev/null |
    tail -n 1 || true
}
get_from_a() { http_get smoke-a "$1"; }

# reaches_api: whether smoke-a reaches the API server through the `kubernetes` Service
# (10.96.0.1:443, by veclane to the node's address over the node link): plain HTTP to its TLS
# port gets Go's telling answer.
reaches_api() {
  http_get smoke-a "${K8S_SERVICE_CIDR%.*/*}.1" 443 | grep -q "HTTPS server"
}

# etcd_count PREFIX/: how many keys of the cluster's etcd start with PREFIX/ (its JSON
# gateway, as veclane's client; the range ends at PREFIX0, '0' being '/' + 1; a count of 0 is
# left out).
etcd_count() {
  local key end
  key=$(printf '%s' "$1" | base64 -w0)
  end=$(printf '%s0' "${1%/}" | base64 -w0)
  k8s_etcd_curl /v3/kv/range -d "{\"key\":\"$key\",\"range_end\":\"$end\",\"count_only\":true}" |
    sed -n 's/.*"count":"\([0-9]*\)".*/\1/p;t;s/.*/0/p'
}

# within30 COMMAND...: whether COMMAND succeeds within 30 tries a second apart (what the node
# agent does follows the API within a second or so).
within30() {
  for _ in $(seq 30); do
    "$@" && return 0
    sleep 1
  done
  return 1
}

# Whether smoke-a gets smoke-b's page from $1 (gets), or nothing (kept_out).
gets() { [ "$(get_from_a "$1")" = hello-from-b ]; }
kept_out() { [ -z "$(get_from_a "$1")" ]; }
# Whether smoke-a reaches $1 on blue (pings), or does not (blue_blocked).
pings() { kubectl exec smoke-a -- ping -c 1 -W 1 "$1" >/dev/null 2>&1; }
blue_blocked() { ! pings "$1"; }

# veclane only: a Service in front of smoke-b's web server, reached by its cluster IP (veclane
# translates it: the node agent made it from the Service and its EndpointSlice), then a
# NetworkPolicy that lets only pods labelled role=friend reach it, before and after smoke-a is
# labelled so.
services_and_policies() {
  kubectl exec smoke-b -- sh -c 'mkdir -p /www && echo hello-from-b >/www/index.html &&
    httpd -p 8080 -h /www'
  kubectl apply -f - <<EOF
apiVersion: v1
kind: Service
metadata: {name: smoke-web, namespace: default}
spec:
  selector: {smoke: b}
  ports: [{port: 80, targetPort: 8080}]
EOF
  local vip
  vip=$(kubectl get service smoke-web -o jsonpath='{.spec.clusterIP}')
  within30 gets "$vip" || die "smoke-a does not reach the Service's cluster IP $vip"
  say "smoke-a reaches smoke-b through the Service's cluster IP $vip"
  kubectl apply -f - <<EOF
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: smoke-friends, namespace: default}
spec:
  podSelector: {matchLabels: {smoke: b}}
  ingress:
  - from: [{podSelector: {matchLabels: {role: friend}}}]
    ports: [{port: 8080}]
EOF
  within30 kept_out "$vip" || die "the NetworkPolicy does not keep smoke-a out"
  say "the NetworkPolicy keeps smoke-a out"
  kubectl label pod smoke-a role=friend >/dev/null
  within30 gets "$vip" || die "smoke-a, labelled role=friend, is still kept out"
  say "labelled role=friend, smoke-a gets in"
  kubectl delete networkpolicy smoke-friends >/dev/null
  kubectl delete service smoke-web >/dev/null
}

# addr_of POD DEVICE: POD's IPv4 address on DEVICE.
addr_of() {
  kubectl exec "$1" -- ip -4 -o addr show dev "$2" | awk '{print $4}' | cut -d/ -f1
}

# veclane only: blue (net1 of smoke-a and smoke-b) carries between its pods, red (net2 of
# smoke-b, net1 of smoke-c) between its; neither network's pods reach the other's addresses.
secondary_networks() {
  local b_blue b_red
  b_blue=$(addr_of smoke-b net1)
  case "$b_blue" in 10.1.0.*) ;; *) die "smoke-b's net1 has $b_blue, not a blue address" ;; esac
  kubectl exec smoke-a -- ping -c 2 -W 2 "$b_blue" >/dev/null ||
    die "smoke-a does not reach smoke-b on blue ($b_blue)"
  if kubectl exec smoke-c -- ping -c 2 -W 2 "$b_blue" >/dev/null 2>&1; then
    die "smoke-c, on red, reaches smoke-b's blue address $b_blue"
  fi
  # smoke-b is on all three networks (eth0, net1 on blue, net2 on red): red carries between
  # it and smoke-c, and smoke-a, not on red, does not reach its red address.
  b_red=$(addr_of smoke-b net2)
  case "$b_red" in 10.2.0.*) ;; *) die "smoke-b's net2 has $b_red, not a red address" ;; esac
  kubectl exec smoke-c -- ping -c 2 -W 2 "$b_red" >/dev/null ||
    die "smoke-c does not reach smoke-b on red ($b_red)"
  if kubectl exec smoke-a -- ping -c 2 -W 2 "$b_red" >/dev/null 2>&1; then
    die "smoke-a, not on red, reaches smoke-b's red address $b_red"
  fi
  say "blue carries between its pods ($b_blue), red too ($b_red); neither reaches the other's"
  # A MultiNetworkPolicy on blue isolating smoke-b's ingress there (nothing allowed): smoke-a
  # no longer reaches it on blue, still does on eth0; deleted, blue carries again.
  kubectl apply -f - <<EOF
apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: smoke-b-alone
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/policy-for: blue}
spec:
  podSelector: {matchLabels: {smoke: b}}
  policyTypes: [Ingress]
EOF
  within30 blue_blocked "$b_blue" ||
    die "the MultiNetworkPolicy does not keep smoke-a from smoke-b on blue"
  kubectl exec smoke-a -- ping -c 1 -W 2 "$(kubectl get pod smoke-b -o jsonpath='{.status.podIP}')" \
    >/dev/null || die "the MultiNetworkPolicy on blue kept smoke-a from smoke-b's eth0 too"
  kubectl delete multi-networkpolicy smoke-b-alone >/dev/null
  within30 pings "$b_blue" || die "blue does not carry again after the MultiNetworkPolicy went"
  say "a MultiNetworkPolicy on blue isolates smoke-b there, not on eth0, and goes away"
}

# veclane only: smoke-a reaches smoke-b on eth0 and on blue, and the API server through the
# `kubernetes` Service (plain HTTP to its TLS port gets Go's telling answer).
connected() {
  local b_ip b_blue
  # Quiet: while a component comes back, exec fails, and a pod's net1 may not be there yet.
  b_ip=$(kubectl get pod smoke-b -o jsonpath='{.status.podIP}' 2>/dev/null) || return 1
  b_blue=$(addr_of smoke-b net1 2>/dev/null)
  [ -n "$b_blue" ] && pings "$b_ip" && pings "$b_blue" && reaches_api
}

# backends_seen VIP N: whether smoke-a sees N distinct pages from VIP within 40 connections
# (each a new flow, spread over the service's backends).
backends_seen() {
  local seen i
  seen=$(for i in $(seq 40); do get_from_a "$1"; done | sort -u | grep -c . || true)
  [ "$seen" -eq "$2" ]
}

# veclane only: a Service in each secondary network (the k8s.v1.cni.cncf.io/service-network
# annotation names the NAD): on blue, three backends (web-1..3), each page its name; on red,
# smoke-c. Each is reached from its own network, through the pod's interface on it (the
# agent routes the cluster IP there), and from nothing else: smoke-a (eth0, blue) does not
# reach red's, smoke-c (eth0, red) not blue's.
network_services() {
  local p vip_blue vip_red
  for p in smoke-c web-1 web-2 web-3; do
    kubectl exec "$p" -- sh -c "mkdir -p /www && echo $p >/www/index.html && httpd -p 8080 -h /www"
  done
  kubectl apply -f - <<EOF
apiVersion: v1
kind: Service
metadata:
  name: web-blue
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/service-network: blue}
spec:
  selector: {app: web-blue}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: web-red
  namespace: default
  annotations: {k8s.v1.cni.cncf.io/service-network: red}
spec:
  selector: {smoke: c}
  ports: [{port: 80, targetPort: 8080}]
EOF
  vip_blue=$(kubectl get service web-blue -o jsonpath='{.spec.clusterIP}')
  vip_red=$(kubectl get service web-red -o jsonpath='{.spec.clusterIP}')
  within30 backends_seen "$vip_blue" 3 ||
    die "smoke-a does not reach the three backends of blue's Service $vip_blue"
  say "blue's Service $vip_blue spreads smoke-a's connections over its three backends"
  kubectl delete pod web-3 --wait=true >/dev/null
  within30 backends_seen "$vip_blue" 2 || die "web-3 deleted, blue's Service still sends to it"
  say "web-3 deleted: blue's Service spreads over the two left"
  red_gets() { [ "$(http_get smoke-c "$1")" = "$2" ]; }
  within30 red_gets "$vip_red" smoke-c || die "smoke-c does not reach red's Service $vip_red"
  red_gets "$vip_blue" "" || die "smoke-c, on red, reaches blue's Service $vip_blue"
  kept_out "$vip_red" || die "smoke-a, not on red, reaches red's Service $vip_red"
  say "red's Service $vip_red serves red only; neither network reaches the other's"
  kubectl delete service web-blue web-red >/dev/null
}

# veclane only: a NetworkPolicy and MultiNetworkPolicy matrix. Two namespaces (mx-a team=alpha,
# mx-b team=beta), a web and a cli pod in each, every pod on eth0 and blue with HTTP servers on
# 80 and 81; in mx-a, web takes a's cli on 80 and b's cli (namespace AND pod selector) on 81;
# in mx-b, cli may only open connections to team alpha's pods on 80 (egress); on blue, mx-b's
# web takes cli pods of any namespace on 81. Every pod then connects to every other on both
# ports on both networks (48 connections), and target/cni/netpol-matrix checks each outcome
# against its oracle, computed from the objects (cni/e2e/matrix).
policy_matrix() {
  local p ns
  kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: mx-a, labels: {team: alpha}}
---
apiVersion: v1
kind: Namespace
metadata: {name: mx-b, labels: {team: beta}}
EOF
  for p in a-web a-cli b-web b-cli; do
    ns=mx-${p%%-*}
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $p
  namespace: $ns
  labels: {app: ${p#*-}}
  annotations: {k8s.v1.cni.cncf.io/networks: default/blue}
spec:
  containers:
  - name: sh
    image: veclane.local/busybox:1.35.0
    imagePullPolicy: Never
    command: ["sh", "-c", "mkdir /www && echo $p >/www/index.html && httpd -p 80 -h /www && httpd -f -p 81 -h /www"]
  terminationGracePeriodSeconds: 1
EOF
  done
  kubectl apply -f - >/dev/null <<EOF
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: web-in, namespace: mx-a}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{podSelector: {matchLabels: {app: cli}}}]
    ports: [{port: 80}]
  - from: [{namespaceSelector: {matchLabels: {team: beta}}, podSelector: {matchLabels: {app: cli}}}]
    ports: [{port: 81}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: cli-out, namespace: mx-b}
spec:
  podSelector: {matchLabels: {app: cli}}
  policyTypes: [Egress]
  egress:
  - to: [{namespaceSelector: {matchLabels: {team: alpha}}}]
    ports: [{port: 80}]
---
apiVersion: k8s.cni.cncf.io/v1beta1
kind: MultiNetworkPolicy
metadata:
  name: web-blue
  namespace: mx-b
  annotations: {k8s.v1.cni.cncf.io/policy-for: default/blue}
spec:
  podSelector: {matchLabels: {app: web}}
  ingress:
  - from: [{namespaceSelector: {}, podSelector: {matchLabels: {app: cli}}}]
    ports: [{port: 81}]
EOF
  for ns in mx-a mx-b; do
    kubectl wait --for=condition=Ready -n "$ns" pod --all --timeout=60s >/dev/null ||
      die "the matrix's pods in $ns did not become Ready"
  done
  target/cni/netpol-matrix --kubeconfig "$K8S_ADMIN_KUBECONFIG" --kubectl "$bin/kubectl" \
    --namespaces mx-a,mx-b --network default/blue --ports 80,81 ||
    die "the connectivity matrix disagrees with the oracle"
  say "the NetworkPolicy and MultiNetworkPolicy matrix (48 connections) is the oracle's"
  kubectl delete namespace mx-a mx-b --wait=true >/dev/null
}

# veclane only: docs/k8s/example.yaml, as docs/kubernetes.md has a user apply it: `client`
# reaches both servers through blue's Service `web`; `stranger`, kept out by the
# MultiNetworkPolicy, reaches neither the Service nor a server's blue address.
example() {
  local vip s1
  kubectl apply -f docs/k8s/example.yaml >/dev/null
  kubectl wait --for=condition=Ready pod/server-1 pod/server-2 pod/client pod/stranger \
    --timeout=60s >/dev/null || die "docs/k8s/example.yaml's pods did not become Ready"
  vip=$(kubectl get service web -o jsonpath='{.spec.clusterIP}')
  both() {
    local pages
    pages=$(for _ in $(seq 20); do http_get client "$vip"; done | sort -u | tr '\n' ' ')
    [ "$pages" = "server-1 server-2 " ]
  }
  within30 both || die "client does not reach both servers through blue's Service $vip"
  s1=$(addr_of server-1 net1)
  [ -z "$(http_get stranger "$vip")" ] || die "stranger reaches blue's Service $vip"
  [ -n "$s1" ] || die "no blue address for server-1"
  [ -z "$(http_get stranger "$s1" 8080)" ] || die "stranger reaches server-1 on blue ($s1)"
  say "docs/k8s/example.yaml: client reaches both servers through blue's Service $vip; stranger is kept out"
  kubectl delete -f docs/k8s/example.yaml --wait=true >/dev/null
}

# net1_rx POD: how many packets POD's net1 has received.
net1_rx() { kubectl exec "$1" -- cat /sys/class/net/net1/statistics/rx_packets; }

# veclane only: gen-a's net1 is a memif on blue, driven by `veclane gen` in the pod (the
# veclane image): its 1,000 frames to smoke-b's blue address all arrive there; frames to
# smoke-c's red address, or from an address not gen-a's, arrive nowhere; smoke-b's pings to
# gen-a arrive in its generator, which counts them.
memif_pod() {
  local mac gw ip b_blue c_red before out
  ip=$(addr_of gen-a net1)
  mac=$(kubectl get pod gen-a -o jsonpath='{.metadata.annotations.k8s\.v1\.cni\.cncf\.io/network-status}' |
    tr -d ' \n' | sed -n 's/.*"interface":"net1","ips":\[[^]]*\],"mac":"\([0-9a-f:]*\)".*/\1/p')
  # The gateway's MAC: the daemon's side of the memif whose allowed source is gen-a's address.
  gw=$(veclane_ctl show interface | awk -v ip="$ip/32" '/^[^ ]/ { m = "" }
    / memif master / { for (i = 1; i <= NF; i++) if ($i == "mac") m = $(i + 1) }
    /allowed sources/ && $3 == ip { print m }')
  if [ -z "$ip" ] || [ -z "$mac" ] || [ -z "$gw" ]; then
    die "gen-a's memif: address '$ip', MAC '$mac', gateway '$gw'"
  fi
  b_blue=$(addr_of smoke-b net1)
  c_red=$(addr_of smoke-c net1)
  gen() {
    kubectl exec gen-a -- veclane gen --socket @veclane-net1 --src-mac "$mac" --dst-mac "$gw" \
      --rate 2000 --tx-only "$@" >/dev/null
  }
  before=$(net1_rx smoke-b)
  gen --src-ip "$ip" --dst-ip "$b_blue" --count 1000
  [ $(($(net1_rx smoke-b) - before)) -ge 1000 ] ||
    die "of gen-a's 1,000 frames, $(($(net1_rx smoke-b) - before)) reached smoke-b on blue"
  before=$(($(net1_rx smoke-b) + $(net1_rx smoke-c)))
  gen --src-ip "$ip" --dst-ip "$c_red" --count 500
  gen --src-ip 10.1.0.250 --dst-ip "$b_blue" --count 500
  [ $(($(net1_rx smoke-b) + $(net1_rx smoke-c))) -eq "$before" ] ||
    die "frames from gen-a to red's $c_red, or from an address not gen-a's, arrived"
  kubectl exec gen-a -- veclane gen --socket @veclane-net1 --rx-only --duration 4 \
    >"$K8S_LOGS/smoke-gen-rx.txt" 2>&1 &
  sleep 1.5
  kubectl exec smoke-b -- ping -c 3 -W 1 "$ip" >/dev/null 2>&1 || true
  wait || true
  out=$(cat "$K8S_LOGS/smoke-gen-rx.txt")
  grep -q "^received *3 frames" <<<"$out" || die "gen-a's generator did not count smoke-b's 3 pings: $out"
  say "gen-a's memif on blue: 1,000 frames reach smoke-b, none to red or from a forged address; smoke-b's pings reach its generator"
}

# veclane only: kubelet, containerd and veclane's pod (daemon and agent) restarted in turn;
# after each,
# smoke-a's connectivity is kept (kubelet, containerd: the pods' interfaces are veclane's)
# or restored (veclane: the agent makes the networks, the node link and the pods' interfaces
# again from etcd, and the services and policies from the API).
restarts() {
  local c t
  for c in kubelet containerd veclane; do
    t=$(date +%s%N)
    case $c in
      kubelet)
        k8s_restart kubelet
        within30 kubectl wait --for=condition=Ready "node/$K8S_NODE" --timeout=5s >/dev/null ;;
      containerd)
        k8s_restart containerd
        within30 ctr --address "$K8S_CONTAINERD_SOCK" version >/dev/null ;;
      veclane)
        # The DaemonSet's pod deleted: its daemon and agent stop, and a new pod starts.
        kubectl -n veclane-system delete pod -l app=veclane --wait=true >/dev/null
        within30 veclane_pod_ready ;;
    esac
    within30 connected || die "after $c restarted, smoke-a lost its connectivity"
    say "$c restarted: smoke-a connected again after $((($(date +%s%N) - t) / 1000000)) ms"
  done
}

t0=$(date +%s%N)
# With veclane: smoke-a and smoke-b also on blue (net1), smoke-b on red too (net2), smoke-c
# on red only (net1).
pods=(smoke-a smoke-b)
if [ "$K8S_CNI" = veclane ]; then
  pods+=(smoke-c web-1 web-2 web-3 gen-a)
  { scripts/k8s-nad.sh blue blue 10.1.0.0/24; echo ---; scripts/k8s-nad.sh red red 10.2.0.0/24
    echo ---; scripts/k8s-nad.sh blue-memif blue 10.1.0.0/24 memif; } | kubectl apply -f - >/dev/null
fi
net_of() {
  case "$K8S_CNI:$1" in
    veclane:smoke-c) echo red ;;
    veclane:gen-a) echo blue-memif ;;
    veclane:smoke-b) echo blue,red ;;
    veclane:*) echo blue ;;
  esac
}
image_of() {
  case $1 in
    gen-a) echo veclane.local/veclane:dev ;;
    *) echo veclane.local/busybox:1.35.0 ;;
  esac
}
labels_of() {
  case $1 in
    web-*) echo "{app: web-blue}" ;;
    *) echo "{smoke: ${1#smoke-}}" ;;
  esac
}
for p in "${pods[@]}"; do
  net=$(net_of "$p")
  kubectl apply -f - <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $p
  namespace: default
  labels: $(labels_of "$p")
  annotations: {k8s.v1.cni.cncf.io/networks: "$net"}
spec:
  containers:
  - name: sh
    image: $(image_of "$p")
    imagePullPolicy: Never
    command: ["sleep", "3600"]
  terminationGracePeriodSeconds: 1
EOF
done
kubectl wait --for=condition=Ready "${pods[@]/#/pod/}" --timeout=120s ||
  { kubectl describe pod "${pods[@]}" >&2; die "the pods did not become Ready"; }
say "pods Ready in $((($(date +%s%N) - t0) / 1000000)) ms"
kubectl get pods "${pods[@]}" -o wide

for p in smoke-a smoke-b; do
  pod_ip=$(kubectl get pod "$p" -o jsonpath='{.status.podIP}')
  in_pod=$(kubectl exec "$p" -- sh -c 'ip -4 -o addr show dev eth0; uname -n')
  echo "$in_pod"
  case "$pod_ip" in
    "${K8S_POD_CIDR%.*.*/*}".*) ;;
    *) die "pod address $pod_ip is not in $K8S_POD_CIDR" ;;
  esac
  grep -q "inet $pod_ip/" <<<"$in_pod" || die "eth0 in $p does not have $pod_ip"
done
b_ip=$(kubectl get pod smoke-b -o jsonpath='{.status.podIP}')
kubectl exec smoke-a -- ping -c 3 -W 2 "$b_ip" || die "smoke-a does not reach smoke-b at $b_ip"
if [ "$K8S_CNI" = veclane ]; then
  n=$(veclane_pods)
  [ "$n" -ge 2 ] || die "veclane's daemon lists $n pod interfaces, not 2 or more"
  reaches_api || die "smoke-a does not reach the API server through the kubernetes Service"
  say "smoke-a reaches the API server through the kubernetes Service"
  secondary_networks
  services_and_policies
  network_services
  memif_pod
  example
  policy_matrix
  restarts
fi
if [ "$K8S_CNI" = veclane ]; then
  # Non-zero before: the count below proves something.
  n=$(etcd_count /veclane/v1/attachments/)
  [ "$n" -ge 6 ] || die "etcd holds $n pod attachments, not one per interface of the pods"
fi
kubectl delete pod "${pods[@]}" --ignore-not-found --wait=true >/dev/null
if [ "$K8S_CNI" = veclane ]; then
  n=$(veclane_pods)
  [ "$n" -eq 0 ] || die "veclane's daemon still lists $n pod interfaces after the pods went"
  for prefix in /veclane/ipam/v1/ /veclane/v1/attachments/; do
    n=$(etcd_count "$prefix")
    [ "$n" -eq 0 ] || die "etcd still holds $n keys under $prefix after the pods went"
  done
  say "the pods' interfaces, addresses and attachments went with them"
  # The cluster's state is not anyone's: etcd refuses a client without a certificate of its CA.
  if curl -fsS --cacert "$K8S_ETCD_PKI/ca.crt" "$K8S_ETCD_URL/v3/kv/range" -d '{"key":"Lw=="}' \
    >/dev/null 2>&1; then
    die "etcd answers a client without a certificate"
  fi
fi
say "ok ($K8S_CNI): pods with addresses from $K8S_POD_CIDR reach each other, exec works, deleting them removes their interfaces$([ "$K8S_CNI" != veclane ] || echo '; with veclane: three networks apart, the kubernetes Service, Services and policies in each network, a memif pod, the example, the policy matrix, restarts, TLS etcd')"
