"""The broker's HTTP listener (``metrics.listener=http://127.0.0.1:9404``; off by default): the
standard library's ThreadingHTTPServer on its own thread, never on the broker's event loop.

- ``GET /metrics``: Prometheus text format (kgroup/broker/metrics.py).
- ``POST /admin/faults``: a fault-injection command as JSON (kgroup/broker/faults.py); 403 when
  the broker does not enable fault injection, 400 for a bad command.
- ``/admin/...``: test control as JSON (test_control.py, docs/testing.md): ``GET /admin/groups``,
  ``/admin/groups/<group>``, ``/admin/groups/<group>/lag``, ``/admin/transactions``,
  ``/admin/topics``, ``GET|POST /admin/clock`` (``{"advance_ms": N}`` moves time forward),
  ``POST /admin/reset``, ``GET|POST /admin/wait`` (a long poll: 200 when the condition holds,
  408 with what was last seen on timeout); 403 without fault injection.
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
# /admin/wait query parameters given as JSON (numbers, objects); the others are strings
JSON_PARAMS = frozenset(("timeout_ms", "members", "lag", "partitions", "offsets", "assignment", "topics", "deleted"))


def _query_value(v: str):
    """A query parameter: JSON when it parses (numbers, objects), else the string."""
    try:
        return json.loads(v)
    except ValueError:
        return v


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
            elif path.startswith("/admin/"):
                self.admin(req, method, path)
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

    # -- test control (test_control.py): state as JSON, time travel, reset, waits ----------------
    def admin(self, req, method: str, path: str) -> None:
        from urllib.parse import parse_qsl, unquote
        from .test_control import ControlError
        control = self.broker.test_control
        if control is None:
            self.reply_json(req, 403, {"error": "test control is disabled on this broker "
                                                "(kgroup.fault.injection.enable=false)"})
            return
        query = dict(parse_qsl(req.path.partition("?")[2]))
        body = {}
        if method == "POST":
            length = int(req.headers.get("Content-Length") or 0)
            try:
                body = json.loads(req.rfile.read(length) or b"{}")
            except ValueError as e:
                self.reply_json(req, 400, {"error": f"not JSON: {e}"})
                return
            if not isinstance(body, dict):
                self.reply_json(req, 400, {"error": "the body is a JSON object"})
                return
        parts = [unquote(p) for p in path.split("/")[2:]]
        cmd = None
        if parts == ["clock"]:
            cmd = {"op": "clock"} if method == "GET" else {"op": "advance-time", **body}
            if method == "POST" and "advance_ms" in body:
                cmd["ms"] = body["advance_ms"]
        elif parts == ["reset"] and method == "POST":
            cmd = {"op": "reset"}
        elif parts == ["groups"] and method == "GET":
            cmd = {"op": "groups"}
        elif len(parts) == 2 and parts[0] == "groups" and method == "GET":
            cmd = {"op": "group", "group": parts[1]}
        elif len(parts) == 3 and parts[0] == "groups" and parts[2] == "lag" and method == "GET":
            total, detail = self.call(control.lag, parts[1], [t for t in query.get("topics", "").split(",") if t])
            self.reply_json(req, 200, {"group": parts[1], "lag": total, "partitions": detail})
            return
        elif parts == ["transactions"] and method == "GET":
            cmd = {"op": "transactions"}
        elif parts == ["topics"] and method == "GET":
            cmd = {"op": "topics", "internal": query.get("internal") in ("true", "1")}
        elif parts == ["wait"]:
            cmd = {"op": "wait", **{k: _query_value(v) if k in JSON_PARAMS else v for k, v in query.items()}, **body}
        if cmd is None:
            self.reply_json(req, 404, {"error": f"no {method} {path}"})
            return
        try:
            if cmd["op"] == "wait":
                answer = self._wait(control, cmd)
                self.reply_json(req, 200 if answer.get("ok") else 408, answer)
                return
            answer = self.call(control.command, cmd)
        except ControlError as e:
            self.reply_json(req, 400, {"error": str(e)})
            return
        if cmd["op"] == "group" and answer["group"] is None:
            self.reply_json(req, 404, {"error": f"no group {cmd['group']}"})
            return
        self.reply_json(req, 200, answer)

    def _wait(self, control, cmd: dict) -> dict:
        """A long poll: the HTTP thread waits for the broker's answer (the loop never blocks)."""
        done = threading.Event()
        box = []

        def start():
            pending = control.command(cmd)
            pending.listen(lambda p: (box.append(p.response), done.set()))
        self.call(start)
        timeout_s = float(cmd.get("timeout_ms", 10_000)) / 1000.0
        if not done.wait(timeout_s + CALL_TIMEOUT_S):
            return {"ok": False, "error": "the broker did not answer the wait"}
        return box[0]

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
