"""``kgroup cluster``: a local cluster in the background, for trying things out.

    kgroup cluster up --brokers 3 [--dir ./cluster] [--port 9092] [--override key=value ...]
                                                  ({node}, {port}, {dir} in a value: broker_overrides)
    kgroup cluster down | status [--dir ./cluster]
    kgroup cluster kill N | stop N | pause N | resume N | start N [--dir ./cluster]

``up`` starts a ZooKeeper (Debian's ``zookeeper`` package: kgroup.testing.zookeeper) on a free
127.0.0.1 port and brokers 1..N on consecutive ports from ``--port``, each ``kgroup serve`` in its
own session (they outlive the command), data in DIR/broker-N, logs in DIR/broker-N.log and
DIR/zookeeper/zookeeper.log; it returns once every broker serves and prints the bootstrap list.
DIR/cluster.json remembers the processes and how to start each again. ``down`` stops the
brokers (SIGTERM: controlled shutdowns) and then ZooKeeper; ``kill``/``stop``/``pause``/``resume``
send SIGKILL/SIGTERM/SIGSTOP/SIGCONT to broker N; ``start`` starts it again on its data and port."""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

STATE = "cluster.json"


def _state_path(d: str) -> str:
    return os.path.join(d, STATE)


def _load(d: str) -> dict:
    try:
        with open(_state_path(d)) as f:
            return json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"kgroup cluster: no cluster in {d} (kgroup cluster up --dir {d})") from None


def _save(d: str, state: dict) -> None:
    tmp = _state_path(d) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, _state_path(d))


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:        # a zombie of ours is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def _signal(pid: int, sig) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return not _alive(pid)


def _start_broker(d: str, state: dict, n: str, timeout: float = 90.0) -> None:
    b = state["brokers"][n]
    log_path = os.path.join(d, f"broker-{n}.log")
    with open(log_path, "ab") as log:
        since = log.tell()
        proc = subprocess.Popen([sys.executable, "-m", "kgroup", "serve", *b["args"]], stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    b["pid"] = proc.pid
    _save(d, state)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log_path, "rb") as f:
            f.seek(since)
            text = f.read().decode(errors="replace")
        if re.search(r"kgroup broker \d+ serving on", text):
            return
        if proc.poll() is not None:
            raise SystemExit(f"kgroup cluster: broker {n} exited with {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.1)
    raise SystemExit(f"kgroup cluster: broker {n} did not start within {timeout:.0f} s (see {log_path})")


def broker_overrides(n: str, port: int, d: str, zk_connect: str, overrides: list[str]) -> dict[str, str]:
    """Broker ``n``'s keys: its node id, a PLAINTEXT listener on ``port``, its data directory and
    the ZooKeeper, then every ``--override`` (applied to every broker), in which ``{node}``,
    ``{port}`` and ``{dir}`` stand for the broker's id, port and the cluster's directory, e.g.
    ``listeners=SASL_SSL://127.0.0.1:{port}`` for a cluster with a SASL_SSL listener only."""
    out = {"node.id": n, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
           "log.dirs": os.path.join(d, f"broker-{n}"), "zookeeper.connect": zk_connect}
    for o in overrides:
        k, sep, v = o.partition("=")
        if not sep:
            raise SystemExit(f"kgroup cluster: --override expects key=value, got {o!r}")
        out[k.strip()] = v.replace("{node}", n).replace("{port}", str(port)).replace("{dir}", d)
    return out


def up(args) -> int:
    from ..testing.zookeeper import ZooKeeperServer
    d = os.path.abspath(args.dir)
    os.makedirs(d, exist_ok=True)
    if os.path.exists(_state_path(d)):
        old = _load(d)
        if _alive(old.get("zookeeper", {}).get("pid")) or any(_alive(b.get("pid")) for b in old["brokers"].values()):
            print(f"kgroup cluster: a cluster is already up in {d} (kgroup cluster down --dir {d})", file=sys.stderr)
            return 1
    zk_port = (old_zk := (_load(d).get("zookeeper", {}) if os.path.exists(_state_path(d)) else {})).get("port")
    zk = ZooKeeperServer(os.path.join(d, "zookeeper"), port=zk_port, detach=True)
    try:
        zk.start()
    except RuntimeError as e:       # not installed, or it would not start: say so in one line
        print(f"kgroup cluster: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    state = {"zookeeper": {"pid": zk.pid, "port": zk.port, "connect": zk.connect}, "brokers": {}}
    del old_zk
    for i in range(args.brokers):
        n = str(i + 1)
        port = args.port + i
        overrides = broker_overrides(n, port, d, zk.connect, args.override or [])
        state["brokers"][n] = {"port": port, "pid": None,
                               "args": [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]}
    _save(d, state)
    for n in state["brokers"]:
        _start_broker(d, state, n)
    print(",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"].values()))
    return 0


def down(args) -> int:
    d = os.path.abspath(args.dir)
    state = _load(d)
    for b in state["brokers"].values():
        if _alive(b.get("pid")):
            _signal(b["pid"], signal.SIGCONT)
            _signal(b["pid"], signal.SIGTERM)
    for b in state["brokers"].values():
        if b.get("pid") and not _wait_gone(b["pid"], 60):
            _signal(b["pid"], signal.SIGKILL)
        b["pid"] = None
    zk = state.get("zookeeper", {})
    if _alive(zk.get("pid")):
        _signal(zk["pid"], signal.SIGTERM)
        if not _wait_gone(zk["pid"], 10):
            _signal(zk["pid"], signal.SIGKILL)
    zk["pid"] = None
    _save(d, state)
    return 0


def status(args) -> int:
    d = os.path.abspath(args.dir)
    state = _load(d)
    zk = state.get("zookeeper", {})
    print(f"zookeeper {zk.get('connect')} {'up' if _alive(zk.get('pid')) else 'down'}")
    for n, b in state["brokers"].items():
        print(f"broker {n} 127.0.0.1:{b['port']} {'up' if _alive(b.get('pid')) else 'down'}")
    return 0


def act(args) -> int:
    d = os.path.abspath(args.dir)
    state = _load(d)
    n = str(args.node)
    if n not in state["brokers"]:
        print(f"kgroup cluster: no broker {n} (brokers {', '.join(state['brokers'])})", file=sys.stderr)
        return 1
    b = state["brokers"][n]
    if args.action == "start":
        if _alive(b.get("pid")):
            print(f"kgroup cluster: broker {n} is running", file=sys.stderr)
            return 1
        _start_broker(d, state, n)
        return 0
    if not _alive(b.get("pid")):
        print(f"kgroup cluster: broker {n} is not running", file=sys.stderr)
        return 1
    sig = {"kill": signal.SIGKILL, "stop": signal.SIGTERM, "pause": signal.SIGSTOP, "resume": signal.SIGCONT}[args.action]
    if args.action in ("kill", "stop"):
        _signal(b["pid"], signal.SIGCONT)
    _signal(b["pid"], sig)
    if args.action in ("kill", "stop"):
        _wait_gone(b["pid"], 60)
        b["pid"] = None
        _save(d, state)
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="kgroup cluster", description="a local kgroup cluster over ZooKeeper")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="start ZooKeeper and N brokers in the background")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--dir", default="./cluster")
    p.add_argument("--port", type=int, default=9092, help="the first broker's port; the others follow")
    p.add_argument("--override", action="append", metavar="KEY=VALUE",
                   help="a broker config key for every broker, repeatable; {node}, {port} and {dir} in the value "
                        "are the broker's id, its port and the cluster's directory")
    p.set_defaults(func=up)
    for name, fn, what in (("down", down, "stop every broker (SIGTERM), then ZooKeeper"),
                           ("status", status, "which processes run")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--dir", default="./cluster")
        p.set_defaults(func=fn)
    for name, what in (("kill", "SIGKILL broker N"), ("stop", "SIGTERM broker N (controlled shutdown)"),
                       ("pause", "SIGSTOP broker N"), ("resume", "SIGCONT broker N"),
                       ("start", "start broker N again")):
        p = sub.add_parser(name, help=what)
        p.add_argument("node", type=int)
        p.add_argument("--dir", default="./cluster")
        p.set_defaults(func=act, action=name)
    args = parser.parse_args(argv)
    return args.func(args)
