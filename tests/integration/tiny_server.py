"""A tiny vLLM-shaped HTTP server for the launcher's integration tests (stdlib only, started with python).

It answers ``GET /health`` and ``GET /v1/models`` like vLLM, and can be told to misbehave: ignore SIGTERM,
spawn children (that ignore SIGTERM, or leave the process group), bind late, exit early with a message,
or turn ``/health`` to 503 (``POST /admin/health/503``). Not a test itself.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STATE = {"health": 200}


def child_main(args: argparse.Namespace) -> None:
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.setsid:
        os.setsid()
    print(f"child {os.getpid()} pgid {os.getpgid(0)} running", flush=True)
    threading.Event().wait()


def make_handler(model: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/health":
                self._send(STATE["health"], {})
            elif self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": model, "object": "model"}]})
            else:
                self._send(404, {"error": "not found"})

        def do_POST(self) -> None:
            if self.path.startswith("/admin/health/"):
                STATE["health"] = int(self.path.rsplit("/", 1)[1])
                self._send(200, STATE)
            else:
                self._send(404, {"error": "not found"})

        def log_message(self, format: str, *args: object) -> None:
            return

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--ignore-sigterm", action="store_true")
    parser.add_argument("--children", type=int, default=0, help="child processes to spawn (a chain)")
    parser.add_argument("--children-ignore-sigterm", action="store_true")
    parser.add_argument("--child-setsid", action="store_true", help="the last child leaves the process group")
    parser.add_argument("--ready-after", type=float, default=0.0, help="bind the port only after this delay")
    parser.add_argument("--exit-after", type=float, default=None)
    parser.add_argument("--exit-code", type=int, default=1)
    parser.add_argument("--message", action="append", default=[], help="stderr line before exiting")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--setsid", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.children > 0:
            _spawn_children(args.children, args.ignore_sigterm, args.child_setsid)
        child_main(args)
        return
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.children:
        _spawn_children(args.children, args.children_ignore_sigterm, args.child_setsid)
    print(f"tiny_server {os.getpid()} starting", flush=True)
    if args.exit_after is not None:
        time.sleep(args.exit_after)
        for line in args.message:
            print(line, file=sys.stderr, flush=True)
        sys.exit(args.exit_code)
    time.sleep(args.ready_after)
    server = ThreadingHTTPServer((args.host, args.port), make_handler(args.model))
    print(f"tiny_server listening on {args.host}:{server.server_address[1]}", flush=True)
    server.serve_forever()


def _spawn_children(count: int, ignore_sigterm: bool, setsid_last: bool) -> None:
    argv = [sys.executable, __file__, "--child", "--children", str(count - 1)]
    if ignore_sigterm:
        argv.append("--ignore-sigterm")
    if setsid_last and count == 1:
        argv.append("--setsid")
    if setsid_last:
        argv.append("--child-setsid")
    subprocess.Popen(argv, stdin=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
