"""The broker's HTTP listener (``metrics.listener=http://127.0.0.1:9404``; off by default): the
standard library's ThreadingHTTPServer on its own thread, never on the broker's event loop.

- ``GET /metrics``: Prometheus text format (kgroup/broker/metrics.py).
- ``POST /admin/faults``: a fault-injection command as JSON (kgroup/broker/faults.py); 403 when
  the broker does not enable fault injection, 400 for a bad command.
- ``GET /``, ``/groups/<group>``, ``/topics``, ``/api/...``: the web console (console.py).

Broker state is only read on the event loop: each request submits a function to the loop
(``call``) and waits for its plain-data result, so the HTTP thread never sees a half-updated
group or log.
"""
from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from .metrics import render

log = logging.getLogger("kgroup.http")
CALL_TIMEOUT_S = 10.0


def parse_http_listener(spec: str) -> tuple[str, int]:
    m = re.fullmatch(r"http://\[?([^\]/]*?)\]?:(\d+)/?", spec.strip())
    if not m:
        raise ValueError(f"Invalid metrics.listener {spec!r}: expected http://host:port")
    return m.group(1) or "127.0.0.1", int(m.group(2))


class BrokerHttpServer:
    def __init__(self, broker, spec: str):
        self.broker = broker
        self.loop = broker.loop
        host, port = parse_http_listener(spec)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "kgroup"

            def log_message(self, fmt, *args):     # access log at DEBUG, not on stderr
                log.debug("%s %s", self.address_string(), fmt % args)

            def do_GET(self):
                outer.handle(self, "GET")

            def do_POST(self):
                outer.handle(self, "POST")

        from .console import Console
        self.console = Console(broker)
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.host = host
        self.thread = threading.Thread(target=self.server.serve_forever, name="kgroup-http", daemon=True)

    def start(self) -> None:
        self.thread.start()
        log.info("metrics listener on http://%s:%d/metrics", self.host, self.port)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def call(self, fn, *args):
        """Run ``fn(*args)`` on the broker's event loop and return its result."""
        async def run():
            return fn(*args)
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(CALL_TIMEOUT_S)

    # -- routing -------------------------------------------------------------------------------
    def handle(self, req: BaseHTTPRequestHandler, method: str) -> None:
        path = req.path.split("?", 1)[0]
        try:
            if method == "GET" and path == "/metrics":
                snap = self.call(self.broker.metrics.snapshot)
                self.reply(req, 200, render(snap), "text/plain; version=0.0.4; charset=utf-8")
            elif method == "POST" and path == "/admin/faults":
                self.faults(req)
            else:
                if not self.console.handle(self, req, method, path):
                    self.reply(req, 404, "not found\n", "text/plain")
        except BrokenPipeError:
            pass
        except Exception:
            log.exception("HTTP %s %s failed", method, path)
            try:
                self.reply(req, 500, "internal error\n", "text/plain")
            except OSError:
                pass

    def faults(self, req) -> None:
        from .faults import FaultError
        length = int(req.headers.get("Content-Length") or 0)
        try:
            cmd = json.loads(req.rfile.read(length) or b"{}")
        except ValueError as e:
            self.reply_json(req, 400, {"error": f"not JSON: {e}"})
            return
        faults = self.broker.faults
        if faults is None:
            self.reply_json(req, 403, {"error": "fault injection is disabled on this broker "
                                                "(kgroup.fault.injection.enable=false)"})
            return
        try:
            self.reply_json(req, 200, self.call(faults.apply, cmd))
        except FaultError as e:
            self.reply_json(req, 400, {"error": str(e)})

    @staticmethod
    def reply(req, status: int, body, content_type: str) -> None:
        data = body.encode() if isinstance(body, str) else body
        req.send_response(status)
        req.send_header("Content-Type", content_type)
        req.send_header("Content-Length", str(len(data)))
        req.send_header("Cache-Control", "no-store")
        req.end_headers()
        req.wfile.write(data)

    def reply_json(self, req, status: int, obj) -> None:
        self.reply(req, status, json.dumps(obj, default=str), "application/json")
