"""A standalone ZooKeeper for tests and ``kgroup cluster up``: Debian's ``zookeeper`` package's
server (``java ... ZooKeeperServerMain zoo.cfg`` from /usr/share/java/zookeeper.jar, whose
manifest carries the class path), on 127.0.0.1, no admin server.

    with ZooKeeperServer(tmp_path / "zk") as zk:
        zk.connect          # "127.0.0.1:PORT", for zookeeper.connect

``start()`` returns once the server answers ``srvr``; ``stop()`` sends SIGTERM, then SIGKILL;
``kill()`` / ``restart()`` keep the data directory and port. It fails, never skips, saying what to
install when Java or the package is missing (scripts/install-interop-deps.sh installs them)."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"

ZOO_CFG = """# ZooKeeper (Debian's zookeeper 3.8): standalone, loopback only, no admin server.
tickTime={tick_ms}
initLimit=10
syncLimit=5
dataDir={data_dir}
clientPort={port}
clientPortAddress=127.0.0.1
admin.enableServer=false
maxClientCnxns=200
autopurge.purgeInterval=0
minSessionTimeout={min_session_ms}
# the brokers' zookeeper.session.timeout.ms holds up to 2 minutes (ZooKeeper's default cap is 20 ticks)
maxSessionTimeout=120000
"""


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def zookeeper_command(cfg: str) -> list[str]:
    java = shutil.which("java")
    if java is None or not os.path.exists(ZOOKEEPER_JAR):
        raise RuntimeError("ZooKeeper is not installed: run scripts/install-interop-deps.sh "
                           "(as root: apt-get install zookeeper)")
    return [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false", "-cp", ZOOKEEPER_JAR,
            "org.apache.zookeeper.server.ZooKeeperServerMain", cfg]


def zookeeper_ok(port: int, host: str = "127.0.0.1") -> bool:
    """The server answers the ``srvr`` four-letter word."""
    try:
        with socket.create_connection((host, port), timeout=1) as s:
            s.sendall(b"srvr")
            return b"Mode:" in s.recv(4096)
    except OSError:
        return False


def tail(path: str, n: int = 60) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


class ZooKeeperServer:
    def __init__(self, work_dir, port: int | None = None, tick_ms: int = 500, detach: bool = False):
        self.work_dir = os.path.abspath(str(work_dir))
        self.port = port or free_port()
        self.tick_ms = tick_ms
        self.detach = detach            # own session: outlives the caller (kgroup cluster up)
        self.proc: subprocess.Popen | None = None
        self.pid: int | None = None
        self.log_path = os.path.join(self.work_dir, "zookeeper.log")

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        data_dir = os.path.join(self.work_dir, "zk-data")
        os.makedirs(data_dir, exist_ok=True)
        cfg = os.path.join(self.work_dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(ZOO_CFG.format(tick_ms=self.tick_ms, data_dir=data_dir, port=self.port,
                                   min_session_ms=2 * self.tick_ms))
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(zookeeper_command(cfg), cwd=self.work_dir, stdout=log,
                                         stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=self.detach)
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}:\n{tail(self.log_path)}")
            if zookeeper_ok(self.port):
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError("ZooKeeper did not start:\n" + tail(self.log_path))

    def stop(self, timeout: float = 10.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def restart(self, timeout: float = 60.0) -> "ZooKeeperServer":
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
