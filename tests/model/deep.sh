#!/usr/bin/env bash
# The protocol's deeper worlds (docs/protocol.md, "Bounds and time"): larger than what
# `cargo test` checks, in a release build, one line per property with its state count.
# Exits non-zero when a property fails. Takes tens of minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p argo-results-model --bin check
time target/release/check deep
