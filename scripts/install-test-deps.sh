#!/usr/bin/env bash
# Non-Python peers the test suite drives: kcat (librdkafka's CLI) from Debian.
# Installed with apt when running as root and absent; the interop tests fail (never skip) in CI
# when a peer is missing.
set -euo pipefail
if ! command -v kcat >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing kcat with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq kcat >/dev/null
    else
        echo "!! kcat is not installed and this is not root: install kcat (Debian: apt-get install kcat)" >&2
    fi
fi
command -v kcat >/dev/null 2>&1 && echo "==> kcat: $(kcat -V 2>&1 | head -1)" || true
