#!/usr/bin/env bash
# veclane as a real Kubernetes cluster's pod network, end to end, as `make test` runs it: a
# one-node cluster (scripts/k8s-up.sh with VECLANE_K8S_CNI=veclane, the daemon VECLANE_BIN or
# target/debug/veclane), the smoke test (scripts/k8s-smoke.sh: two pods on veclane taps reach
# each other, their interfaces go with them), and the cluster torn down whatever happened.
# Needs root; refuses while another cluster of this state directory runs. Usage:
#
#   scripts/k8s-e2e.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export VECLANE_K8S_CNI=veclane
export VECLANE_BIN=${VECLANE_BIN:-target/debug/veclane}
trap 'scripts/k8s-down.sh >/dev/null 2>&1 || echo "k8s-e2e: k8s-down failed" >&2' EXIT
scripts/k8s-up.sh >/dev/null
scripts/k8s-smoke.sh
