"""Run a real kgroup broker process on 127.0.0.1 with an ephemeral port, and talk to it with raw
sockets using our own codec."""
from __future__ import annotations

import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time

from kgroup.coordinator import group_partition
from kgroup.coordinator.coordinator_records import GROUP_METADATA, decode_record
from kgroup.protocol.api import encode_request, parse_response
from kgroup.protocol.records import decode_records, iter_batches
from tests.conftest import ROOT


class BrokerProcess:
    def __init__(self, data_dir, overrides=(), config_file=None, preexec_fn=None, env=None):
        self.data_dir = str(data_dir)
        self.preexec_fn = preexec_fn  # e.g. lower the broker's RLIMIT_NOFILE
        self.env = env                # extra environment (e.g. LD_PRELOAD for disk faults)
        self.overrides = list(overrides)
        self.config_file = config_file
        self.proc = None
        self.port = None
        parent = os.path.dirname(os.path.abspath(self.data_dir))
        os.makedirs(parent, exist_ok=True)
        self.log_path = os.path.join(parent, f"broker-{os.path.basename(self.data_dir)}.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "BrokerProcess":
        args = [sys.executable, "-m", "kgroup", "serve",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0",
                "--override", f"log.dirs={self.data_dir}"]
        if self.config_file:
            args += ["--config", str(self.config_file)]
        for o in self.overrides:
            args += ["--override", o]
        self._log = open(self.log_path, "ab")
        start_size = self._log.tell()
        self.proc = subprocess.Popen(args, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT,
                                     preexec_fn=self.preexec_fn,
                                     env=None if self.env is None else {**os.environ, **self.env})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_text(start_size)
            m = re.search(r"serving on 127\.0\.0\.1:(\d+)", text)
            if m:
                self.port = int(m.group(1))
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.02)
        self.proc.kill()        # never leave a broker behind a failed start
        self.proc.wait()
        raise RuntimeError("broker did not start:\n" + self.log_text())

    def log_text(self, since: int = 0) -> str:
        with open(self.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)


class RawClient:
    """A blocking socket speaking our codec: for protocol-level tests."""

    def __init__(self, port: int, client_id: str | None = "raw-test"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.client_id = client_id
        self.correlation_id = 0

    def send(self, body, version: int) -> int:
        self.correlation_id += 1
        self.sock.sendall(b"".join(encode_request(body, version, self.correlation_id, self.client_id)))
        return self.correlation_id

    def recv_frame(self) -> bytes:
        size, = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, body, version: int):
        cid = self.send(body, version)
        got_cid, resp = parse_response(type(body).API_KEY, version, self.recv_frame())
        assert got_cid == cid
        return resp

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            c = self.sock.recv(n)
            if not c:
                raise ConnectionError("connection closed by the broker")
            chunks.append(c)
            n -= len(c)
        return b"".join(chunks)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False

    def close(self):
        self.sock.close()


def free_port() -> int:
    """A port free on 127.0.0.1 right now (for a peer that must be told its port up front)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def group_records(data_dir, group, num_partitions=50):
    """Every GroupMetadataValue of ``group`` in its ``__consumer_offsets`` partition, in log order
    (what the coordinator persisted per generation), read from the broker's data directory."""
    directory = os.path.join(data_dir, f"__consumer_offsets-{group_partition(group, num_partitions)}")
    out = []
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        for _pos, header, batch in iter_batches(data):
            for r in decode_records(batch, header):
                if r.key is not None and int.from_bytes(r.key[:2], "big") > GROUP_METADATA:
                    continue        # a consumer-protocol group's record (KIP-848) sharing the partition
                rec = decode_record(r.key, r.value)
                if rec.record_type == GROUP_METADATA and rec.key_struct.group == group and rec.value_struct:
                    out.append(rec.value_struct)
    return out
