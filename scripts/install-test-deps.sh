#!/usr/bin/env bash
# Non-Python peers the test suite drives, from Debian: kcat (librdkafka's CLI), openssl, a Java runtime
# for Spark, Prometheus and Chromium. Installed with apt when running as root and absent; the tests that need them fail
# (never skip) when a peer is missing.
set -euo pipefail
apt_updated=""
apt_install() {  # apt_install COMMAND PACKAGE
    if command -v "$1" >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "==> installing $2 with apt-get"
        export DEBIAN_FRONTEND=noninteractive
        if [ -z "$apt_updated" ]; then
            apt-get update -qq >/dev/null
            apt_updated=1
        fi
        apt-get install -y -qq "$2" >/dev/null
    else
        echo "!! $1 is missing and this is not root: install the Debian package $2" >&2
    fi
}
apt_install kcat kcat
# openssl generates the test certificates (kgroup/testing/certs.py) for the TLS listeners.
apt_install openssl openssl
apt_install java openjdk-17-jre-headless
# Prometheus scrapes kgroup's /metrics in tests/testing/test_metrics.py; Chromium renders the
# web console headless in tests/testing/test_console.py.
apt_install prometheus prometheus
apt_install chromium chromium
command -v kcat >/dev/null 2>&1 && echo "==> kcat: $(kcat -V 2>&1 | head -1)" || true
command -v java >/dev/null 2>&1 && echo "==> java: $(java -version 2>&1 | head -1)" || true
# kafkajs (npm), Burrow and ZooKeeper (Debian) for the compatibility matrix
bash "$(dirname "$0")/install-interop-deps.sh"
