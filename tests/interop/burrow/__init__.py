"""Burrow 1.2.1 and the ZooKeeper it needs (both Debian packages), on free 127.0.0.1 ports, for
the compatibility matrix (tests/interop/test_matrix_burrow.py).

    with BurrowStack(tmp_path, broker.bootstrap) as burrow:
        burrow.wait_group("g", lambda parts: ...)      # polls Burrow's HTTP API
        burrow.group_lag("g")                          # {(topic, partition): current-lag}

ZooKeeper is kgroup.testing.zookeeper's ZooKeeperServer (Debian's ``zookeeper``, loopback only,
no admin server). Burrow runs as ``/usr/bin/Burrow --config-dir DIR`` with burrow.toml.tmpl filled in.
Both are stopped (SIGTERM, then SIGKILL) by ``stop()``. scripts/install-interop-deps.sh
installs them; nothing here skips when they are missing: it fails saying what to install.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request

from kgroup.testing.zookeeper import ZooKeeperServer, tail as _tail
from tests.harness import free_port

HERE = os.path.dirname(os.path.abspath(__file__))


def burrow_binary() -> str:
    path = shutil.which("Burrow") or shutil.which("burrow")
    if path is None:
        raise RuntimeError("Burrow is not installed: run scripts/install-interop-deps.sh "
                           "(as root: apt-get install burrow zookeeper)")
    return path


def _render(template: str, dest: str, **values) -> None:
    with open(os.path.join(HERE, template)) as f:
        text = f.read()
    with open(dest, "w") as f:
        f.write(text.format(**values))


def _stop(proc: subprocess.Popen | None, timeout: float = 10.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


class BurrowStack:
    def __init__(self, work_dir, bootstrap: str):
        self.work_dir = str(work_dir)
        self.bootstrap = bootstrap
        self.zk_port = self.http_port = None
        self.zk = self.burrow = None
        self.zk_log = os.path.join(self.work_dir, "zookeeper.log")
        self.burrow_log = os.path.join(self.work_dir, "burrow.log")

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> "BurrowStack":
        self.zk = ZooKeeperServer(self.work_dir).start(timeout)
        self.zk_port = self.zk.port
        self.http_port = free_port()
        _render("burrow.toml.tmpl", os.path.join(self.work_dir, "burrow.toml"), work_dir=self.work_dir,
                zk_port=self.zk_port, bootstrap=self.bootstrap, http_port=self.http_port)
        with open(self.burrow_log, "ab") as log:
            self.burrow = subprocess.Popen([burrow_binary(), "--config-dir", self.work_dir], cwd=self.work_dir,
                                           stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.burrow.poll() is not None:
                raise RuntimeError(f"Burrow exited with {self.burrow.returncode}:\n{self.log_tail()}")
            try:
                if self._get("/burrow/admin", raw=True).strip() == "GOOD":
                    return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise RuntimeError("Burrow did not start:\n" + self.log_tail())

    def stop(self) -> None:
        _stop(self.burrow)
        if self.zk is not None:
            self.zk.stop()

    def __enter__(self) -> "BurrowStack":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, n: int = 60) -> str:
        return _tail(self.burrow_log, n)

    # -- Burrow's HTTP API (v3) ------------------------------------------------------------------
    def _get(self, path: str, raw: bool = False):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}{path}", timeout=5) as r:
            body = r.read().decode()
        return body if raw else json.loads(body)

    def consumers(self, cluster: str = "kgroup") -> list[str]:
        return self._get(f"/v3/kafka/{cluster}/consumer").get("consumers", [])

    def group_lag(self, group: str, cluster: str = "kgroup") -> dict:
        """{(topic, partition): (committed offset, current lag)} from
        GET /v3/kafka/<cluster>/consumer/<group>: the latest commit Burrow read from
        __consumer_offsets and its lag against the newest log-end offset Burrow fetched."""
        try:
            body = self._get(f"/v3/kafka/{cluster}/consumer/{group}")
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return {}
            raise
        out = {}
        for topic, partitions in (body.get("topics") or {}).items():
            for p, part in enumerate(partitions or []):
                offsets = [o for o in (part.get("offsets") or []) if o]
                if offsets:
                    out[(topic, p)] = (offsets[-1]["offset"], part.get("current-lag"))
        return out

    def group_status(self, group: str, cluster: str = "kgroup") -> dict:
        """GET /v3/kafka/<cluster>/consumer/<group>/lag: the evaluator's verdict."""
        return self._get(f"/v3/kafka/{cluster}/consumer/{group}/lag")

    def wait_group(self, group: str, predicate, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.group_lag(group)
            except (OSError, urllib.error.URLError, ValueError) as e:
                last = repr(e)
            if isinstance(last, dict) and predicate(last):
                return last
            time.sleep(0.3)
        raise AssertionError(f"Burrow never reported the expected lag for {group}: {last}\n{self.log_tail()}")

