#!/usr/bin/env bash
# Checks the one-node cluster scripts/k8s-up.sh started: the node is Ready, a busybox pod
# (our local image, imagePullPolicy: Never) runs, `kubectl exec` reaches it, and its address
# came from the pod network's range. Deletes the pod at the end. Usage:
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

kubectl get nodes -o wide
kubectl wait --for=condition=Ready "node/$K8S_NODE" --timeout=10s >/dev/null ||
  die "node $K8S_NODE is not Ready"

t0=$(date +%s%N)
kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Pod
metadata:
  name: smoke-busybox
  namespace: default
spec:
  containers:
  - name: sh
    image: veclane.local/busybox:1.35.0
    imagePullPolicy: Never
    command: ["sleep", "3600"]
  terminationGracePeriodSeconds: 1
EOF
kubectl wait --for=condition=Ready pod/smoke-busybox --timeout=120s ||
  { kubectl describe pod smoke-busybox >&2; die "the pod did not become Ready"; }
say "pod Ready in $((($(date +%s%N) - t0) / 1000000)) ms"
kubectl get pod smoke-busybox -o wide

pod_ip=$(kubectl get pod smoke-busybox -o jsonpath='{.status.podIP}')
in_pod=$(kubectl exec smoke-busybox -- sh -c 'ip -4 -o addr show dev eth0; uname -n')
echo "$in_pod"
case "$pod_ip" in
  "${K8S_POD_CIDR%.*.*/*}".*) ;;
  *) die "pod address $pod_ip is not in $K8S_POD_CIDR" ;;
esac
grep -q "inet $pod_ip/" <<<"$in_pod" || die "eth0 in the pod does not have $pod_ip"
kubectl delete pod smoke-busybox --wait=true >/dev/null
say "ok: pod address $pod_ip from $K8S_POD_CIDR, exec works"
