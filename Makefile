# veclane: the two commands a new machine needs are `make bench` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
CARGO ?= cargo
FUZZ_SECS ?= 20
FUZZ_TARGETS := control_msg primary_handshake ring_walk secondary_rx
GO_PEER := interop/gomemif-peer

.PHONY: setup build bench test lint fuzz fuzz-smoke clean

setup:
	scripts/setup.sh

build: setup
	$(CARGO) build --release -p veclane

## The main job: memif point-to-point throughput, then L3 forwarding (veclane single- and
## two-copy vs dpdk-testpmd io forwarding), side by side.
bench: build
	./target/release/veclane bench p2p
	./target/release/veclane bench l3fwd

## Every check CI runs.
test: setup lint
	$(CARGO) test --workspace --all-targets
	$(MAKE) fuzz-smoke FUZZ_SECS=$(FUZZ_SECS)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	cd $(GO_PEER) && test -z "$$(gofmt -l .)" && go vet ./... && go test -count=1 ./...

## Each fuzz target for FUZZ_SECS seconds (make fuzz FUZZ_SECS=600 for the long runs).
fuzz-smoke fuzz:
	@for t in $(FUZZ_TARGETS); do \
	  echo "fuzz: $$t for $(FUZZ_SECS) s"; \
	  (cd fuzz && $(CARGO) +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECS) -print_final_stats=1 2>&1 | tail -n 3) || exit 1; \
	done

clean:
	$(CARGO) clean
