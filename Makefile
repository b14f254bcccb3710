# veclane: the two commands a new machine needs are `make bench` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
CARGO ?= cargo
FUZZ_SECS ?= 20
FUZZ_TARGETS := control_msg primary_handshake ring_walk secondary_rx ip4_graph vxlan_uplink tap_rx af_packet_rx metrics_http
GO_PEER := interop/gomemif-peer
# Go modules: gofmt and go vet in `make lint`, go test after the Rust tests in `make test` (the
# cluster's control plane in cni/ tests against a real etcd and the daemon cargo built).
GO_MODULES := $(GO_PEER) cni

.PHONY: setup build bench bench-full test go-test lint fuzz fuzz-smoke clean package package-check \
	k8s-up k8s-down k8s-e2e soak

setup:
	scripts/setup.sh

build: setup
	$(CARGO) build --release -p veclane

## The main job, about 3 minutes: L3 forwarding NDR (zero-loss throughput, binary search with
## loss verification) at 64, 512 and 1500 bytes, veclane (single-copy), dpdk-testpmd io
## forwarding and VPP (when scripts/build-vpp.sh has built it; the run says how when not)
## side by side, with the generator's own ceiling (none: a memif master that only hands
## frames across; rows flat out within 10% of it are flagged generator-bound), three searches
## each of 50 ms trials, the DUTs' trials taking turns (--interleave trials), after a 10 ms
## warm-up (short, so that more searches fit: one search's pair ratio swings 15% with the
## host, and only the median of many holds still);
## 0.5 s flat-out and 0.25 s latency trials; table, then JSON, CSV and SVG.
bench: build
	./target/release/veclane bench l3fwd --sizes 64,512,1500 --dut veclane,testpmd,vpp,none --allow-missing-peer --copy single --wait-near 1 --trial-secs 0.05 --reps 3 --mrr-secs 0.5 --latency-secs 0.25

## Everything, laid out like the seeds' tables (about 45 minutes): memif p2p; L3 forwarding NDR
## (0.1 s trials, twice make bench's; 10 minutes) at every size for veclane single- and two-copy,
## testpmd, DPDK's l3fwd and VPP (when built), with the seeds' figures beside ours; MLRsearch
## NDR and PDR (CSIT's goals, 50 ms trials, so that most trials fall between the host's
## stalls); the seeds' node switch, singlenet beside multinet at their sizes (15 minutes) with
## their tables beside ours; instructions per packet under callgrind, l3fwd and both node
## shapes.
bench-full: build
	./target/release/veclane bench p2p
	./target/release/veclane bench l3fwd --sizes 64,128,256,512,1024,1500 --dut veclane,testpmd,dpdk-l3fwd,vpp --allow-missing-peer --copy single,two --wait-near 2 --trial-secs 0.1 --compare-seed
	./target/release/veclane bench l3fwd --search mlr --trial-secs 0.05 --sizes 64,512,1500 --dut veclane,testpmd --copy single --wait-near 2
	./target/release/veclane bench multinet --sizes 64,128,256,512,1024,1280,1500,1518,9000 --dut veclane,vpp --allow-missing-peer --copy single,two --wait-near 2 --trial-secs 0.1 --latency-at 0.5 --compare-seed
	./target/release/veclane bench l3fwd --cost --sizes 64,512,1500 --dut veclane,testpmd --copy single,two
	./target/release/veclane bench multinet --cost --sizes 64,512,1500 --copy single

## Every check CI runs.
test: setup lint
	$(CARGO) test --workspace --all-targets
	$(CARGO) test -p memif --features abtime --lib abtime
	$(MAKE) go-test
	$(MAKE) k8s-e2e
	$(MAKE) package-check
	$(MAKE) fuzz-smoke FUZZ_SECS=$(FUZZ_SECS)

## The Go modules' tests; cni/'s start a real etcd and the veclane daemon that `cargo test` built
## (target/debug/veclane), and a real kube-apiserver (scripts/build-k8s.sh builds Kubernetes once
## per machine, about 11 minutes the first time; later runs find it built).
go-test:
	scripts/build-k8s.sh >/dev/null
	for m in $(GO_MODULES); do \
	  (cd $$m && go test -count=1 ./...) || { echo "go module $$m: tests failed" >&2; exit 1; }; \
	done

## The three-node cluster of cni/e2e soaked for SOAK (docs/cluster.md, "Soak"; not in `make
## test`): pings and memif traffic, pod churn, agents and daemons killed at random, ARP and
## new-flow floods from the underlay; every loss in a restart window or counted, memory and
## open files flat after the warm-up, nothing stuck or left over. The summary is logged and
## written to SOAK_OUT. `make soak SOAK=10m` for a short one; the timeout is SOAK plus 15
## minutes (a Go duration sums its terms: 1h15m, 10m15m).
SOAK ?= 1h
SOAK_OUT ?= $(CURDIR)/docs/results/$(shell date +%Y-%m-%d)-soak.json
soak:
	$(CARGO) build -p veclane
	cd cni && VECLANE_SOAK=$(SOAK) VECLANE_SOAK_OUT=$(SOAK_OUT) \
	  go test -tags soak -count=1 -timeout $(SOAK)15m -run TestSoak -v ./e2e

## The Debian package of the production daemon (docs/operations.md): target/debian/*.deb.
package: setup
	scripts/package.sh

## Builds the package, checks its contents and unit, unpacks it and starts the packaged daemon.
package-check: setup
	scripts/package-check.sh

## A one-node Kubernetes cluster as plain processes on this machine (docs/kubernetes.md); the
## first run builds Kubernetes from the Go module proxy (scripts/build-k8s.sh, once per machine).
k8s-up:
	scripts/k8s-up.sh

k8s-down:
	scripts/k8s-down.sh

## veclane as a real cluster's pod network (scripts/k8s-e2e.sh, about 1.5 minutes): up with
## veclane as a DaemonSet, the smoke test (networks, services, policies, a memif pod, a policy
## matrix against an oracle, restarts), down.
k8s-e2e:
	scripts/k8s-e2e.sh

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p veclane --no-default-features -- -D warnings
	$(CARGO) clippy -p memif --features abtime --all-targets -- -D warnings
	for m in $(GO_MODULES); do \
	  (cd $$m && test -z "$$(gofmt -l .)" && go vet ./...) || { echo "go module $$m: gofmt or go vet failed" >&2; exit 1; }; \
	done

## Each fuzz target for FUZZ_SECS seconds (make fuzz FUZZ_SECS=600 for the long runs).
fuzz-smoke fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz: $$t for $(FUZZ_SECS) s"; \
	  (cd fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECS) -print_final_stats=1 2>&1 | tail -n 3) || exit 1; \
	done

clean:
	$(CARGO) clean
