#!/usr/bin/env bash
# Runs every Skein test on a fresh machine: installs what the tests need
# (Python clients, …), then formatting, lints, and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")"

# One warm build directory outside the clone, shared by runs.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/skein-target}"
export CARGO_TERM_COLOR=never

step() { printf '\n== %s\n' "$*"; }

step "test dependencies"
# A test whose client is missing fails (none skips), and set -e stops the
# run here when an install fails.
python3 -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
# strace records the server's system calls in the durability proof
# (crates/skein/tests/durability.rs: every ack follows its fsync).
if ! command -v strace >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends strace >/dev/null
fi
# The openssl CLI makes the self-signed certificates of the TLS tests
# (crates/skein/tests/tls.rs).
if ! command -v openssl >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends openssl >/dev/null
fi
# Headless Chromium for the web UI's browser test (crates/skein/tests/ui.rs),
# driven by playwright-core from tests/conformance/package.json.
if [ ! -x /usr/bin/chromium ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# Prometheus (with promtool), the oracle of the PromQL conformance test
# (crates/skein/tests/promql.rs), which starts its own instances on loopback
# ports. The package's own service is kept from starting (policy-rc.d).
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
    apt-get update -qq
    made_policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if [ -n "$made_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi
fi
# The OpenTelemetry JS SDK and playwright-core (tests/conformance/package-lock.json), reinstalled
# only when the lock file changes.
lock_sum="$(sha256sum tests/conformance/package-lock.json | cut -d' ' -f1)"
lock_stamp=tests/conformance/node_modules/.skein-lock-sha256
if [ "$(cat "$lock_stamp" 2>/dev/null)" != "$lock_sum" ]; then
    npm ci --prefix tests/conformance --loglevel=error --no-audit --no-fund --no-update-notifier
    echo "$lock_sum" >"$lock_stamp"
fi

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "all tests passed"
