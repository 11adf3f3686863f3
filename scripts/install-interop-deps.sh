#!/usr/bin/env bash
# Non-Python peers of the compatibility matrix (tests/interop/test_matrix_*.py):
#   - kafkajs 2.2.4: `npm ci` in tests/interop/node (pinned by its package-lock.json); needs node+npm
#     (Debian's nodejs/npm are installed with apt-get when root and absent)
#   - Burrow 1.2.1 and ZooKeeper 3.8 (Debian packages burrow, zookeeper; ZooKeeper brings a JRE)
# Idempotent: does nothing that is already done. As root it installs what is missing with apt-get;
# otherwise it says what to install. The matrix tests never skip: a missing peer fails them, naming
# this script. Called by scripts/install-test-deps.sh (make test).
set -euo pipefail
cd "$(dirname "$0")/.."
NODE_DIR=tests/interop/node

apt_updated=0
apt_install() {
    if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "!! missing: $* — install them (Debian: apt-get install $*)" >&2
        return 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    if [ "$apt_updated" = 0 ]; then
        echo "==> apt-get update"
        apt-get update -qq >/dev/null
        apt_updated=1
    fi
    echo "==> apt-get install $*"
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# -- node + kafkajs -----------------------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    apt_install nodejs npm
fi
if command -v npm >/dev/null 2>&1; then
    want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["packages"]["node_modules/kafkajs"]["version"])' \
        "$NODE_DIR/package-lock.json")
    have=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' \
        "$NODE_DIR/node_modules/kafkajs/package.json" 2>/dev/null || echo none)
    if [ "$have" != "$want" ]; then
        echo "==> npm ci in $NODE_DIR (kafkajs $want, from package-lock.json)"
        (cd "$NODE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
    fi
    echo "==> node $(node --version), kafkajs $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$NODE_DIR/node_modules/kafkajs/package.json")"
fi

# -- Burrow + ZooKeeper ---------------------------------------------------------------------------------
missing=()
command -v Burrow >/dev/null 2>&1 || missing+=(burrow)
[ -f /usr/share/java/zookeeper.jar ] && command -v java >/dev/null 2>&1 || missing+=(zookeeper)
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}"
fi
# Debian's zookeeperd would start a system-wide ZooKeeper on 0.0.0.0:2181; the tests start their own
# on a free 127.0.0.1 port (kgroup.testing.zookeeper), so only the zookeeper package is needed.
if command -v Burrow >/dev/null 2>&1; then
    echo "==> Burrow $(dpkg-query -W -f='${Version}' burrow 2>/dev/null || echo '?'), ZooKeeper $(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo '?')"
fi
