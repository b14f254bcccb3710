#!/usr/bin/env bash
# Prints a NetworkAttachmentDefinition for the one-node cluster of scripts/k8s-up.sh
# (VECLANE_K8S_CNI=veclane): NAME, for veclane's network NETWORK, addresses from RANGE (inside
# the network's), interfaces of KIND (tap, the default, or memif); its plugin reaches this
# cluster's daemon and etcd. Usage:
#
#   scripts/k8s-nad.sh blue blue 10.1.0.0/24 | kubectl apply -f -
#   scripts/k8s-nad.sh blue-memif blue 10.1.0.0/24 memif | kubectl apply -f -
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 3 ] || [ $# -gt 4 ]; then sed -n "2,8p" "$0" >&2; exit 2; fi
# shellcheck source=scripts/k8s-env.sh
. scripts/k8s-env.sh
# shellcheck source=scripts/k8s-veclane.sh
. scripts/k8s-veclane.sh
veclane_nad "$@"
