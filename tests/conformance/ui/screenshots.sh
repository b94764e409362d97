#!/usr/bin/env bash
# Screenshots of every page of the web UI into docs/ui/ (PNG), light and
# dark: builds skein, starts it on free loopback ports with a fresh data
# directory, loads the browser test's fixture, and drives headless Chromium.
#
#   tests/conformance/ui/screenshots.sh [OUT_DIR]     (default docs/ui)
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
out="$(realpath -m "${1:-$root/docs/ui}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/skein-target}"
cd "$root"
cargo build --quiet -p skein
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
api="127.0.0.1:$(port)" otlp="127.0.0.1:$(port)" grpc="127.0.0.1:$(port)"
data="$(mktemp -d)"
"$CARGO_TARGET_DIR/debug/skein" serve --data-dir "$data" --api-addr "$api" --otlp-http-addr "$otlp" --otlp-grpc-addr "$grpc" 2>"$data.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data" "$data.log"' EXIT
for _ in $(seq 100); do
    curl -fs "http://$api/readyz" >/dev/null && break
    sleep 0.1
done
cd tests/conformance/ui
node browser.mjs screenshots --api "http://$api" --otlp "http://$otlp" --out "$out"
