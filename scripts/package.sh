#!/usr/bin/env bash
# Builds the Debian package of the production daemon (`veclane run`, `veclane ctl`, without
# the generator and the benchmark harness): target/debian/veclane_<version>_<arch>.deb.
# The man pages, shell completions and default configuration are generated from this build.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v cargo-deb >/dev/null 2>&1 || cargo install --locked cargo-deb
# This replaces target/release/veclane with the production build (`make bench` relinks the
# harness one when it next runs); cargo-deb takes it from there.
cargo build --release -p veclane --no-default-features
out=target/package-assets
rm -rf "$out"
mkdir -p "$out"
target/release/veclane generate-assets --out "$out"
target/release/veclane run --print-default-config > "$out/veclane.toml"
cargo deb -p veclane --no-build --quiet
ls target/debian/veclane_*.deb
