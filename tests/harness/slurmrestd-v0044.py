#!/usr/bin/env python3
"""slurmrestd v0.0.44 in front of the harness's Slurm 24.11 (v0.0.40-v0.0.42), for the real
Slinky slurm-operator.

slurm-operator v1.0.x talks only /slurm/v0.0.44/ (Slurm 25.11), which no Slurm built on this
machine serves, and with DEBUG=1 it dials exactly http://localhost:6820. This proxy listens
there and forwards to the 24.11 slurmrestd, rewriting the path prefix /slurm/v0.0.44/ to
/slurm/v0.0.42/. Everything else passes through unchanged: method, query, body, the
operator's own X-SLURM-USER-TOKEN (an HS256 token it mints from the Controller's key Secret,
which slurmrestd checks as it would in a cluster), status and answer.

No JSON is rewritten, because none has to be. Checked against the OpenAPI specs (and the
spec slurm-client v1.0.1's api/v0044 is generated from, identical for these schemas): from
v0.0.42 to v0.0.44 the answers the operator reads (openapi_nodes_resp, openapi_job_info_resp,
openapi_resp) and the node update it sends (update_node_msg: state DRAIN/UNDRAIN/IDLE,
reason, comment) lose no property and change no type, format or array-ness; v0.0.44 only
adds properties and enum values. Go's encoding/json leaves absent fields zero and does not
check enum strings, so every v0.0.42 answer decodes. If a later operator needs a field
v0.0.42 lacks, translate it here.

  slurmrestd-v0044.py [LOOPBACK_ADDRESS:]LISTEN_PORT UPSTREAM_URL
                                                (listens on 127.0.0.1, or another loopback
                                                 address, only)

Logs one line per request (method, path, status, size, time) to stderr; never headers,
so never a token.
"""

import http.client
import http.server
import sys
import time
import urllib.parse

FROM_PREFIX = "/slurm/v0.0.44/"
TO_PREFIX = "/slurm/v0.0.42/"
# Per connection, not end to end (RFC 9110 7.6.1): never forwarded. Content-Length is set anew.
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
    "trailer", "transfer-encoding", "upgrade", "host", "content-length",
}
# slurmrestd answers a 5,000-job /jobs in seconds; generous, like the operator's own client.
UPSTREAM_TIMEOUT = 120


class Proxy(http.server.BaseHTTPRequestHandler):
    # HTTP/1.1 keeps the operator's connections open; every answer carries Content-Length.
    protocol_version = "HTTP/1.1"

    def forward(self):
        started = time.monotonic()
        path = self.path
        if path.startswith(FROM_PREFIX):
            path = TO_PREFIX + path[len(FROM_PREFIX):]
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
        upstream = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=UPSTREAM_TIMEOUT)
        try:
            upstream.request(self.command, path, body=body, headers=headers)
            resp = upstream.getresponse()
            data = resp.read()
            status, reason, resp_headers = resp.status, resp.reason, resp.getheaders()
        except OSError as e:  # slurmrestd away (restd-stop) or timing out
            status, reason, resp_headers = 502, "Bad Gateway", [("Content-Type", "text/plain")]
            data = f"slurmrestd-v0044: upstream {UPSTREAM.geturl()}: {e}\n".encode()
        finally:
            upstream.close()
        self.send_response(status, reason)
        for k, v in resp_headers:
            if k.lower() not in HOP_BY_HOP:
                self.send_header(k, v)
        no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        self.send_header("Content-Length", "0" if no_body else str(len(data)))
        self.end_headers()
        if not no_body:
            self.wfile.write(data)
        self.log_message('"%s %s" -> %s %d B %.0f ms', self.command, path, status, len(data),
                         (time.monotonic() - started) * 1000)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = forward

    def log_request(self, code="-", size="-"):
        pass  # forward() logs its own line, with the rewritten path and the time taken

    def log_message(self, fmt, *args):
        sys.stderr.write("%s %s\n" % (time.strftime("%H:%M:%S"), fmt % args))
        sys.stderr.flush()


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: slurmrestd-v0044.py [LOOPBACK_ADDRESS:]LISTEN_PORT UPSTREAM_URL")
    UPSTREAM = urllib.parse.urlsplit(sys.argv[2])
    ADDRESS, _, PORT = sys.argv[1].rpartition(":")
    ADDRESS = ADDRESS or "127.0.0.1"
    if not ADDRESS.startswith("127."):
        sys.exit(f"slurmrestd-v0044: {ADDRESS} is not a loopback address")
    server = http.server.ThreadingHTTPServer((ADDRESS, int(PORT)), Proxy)
    server.daemon_threads = True
    sys.stderr.write(f"slurmrestd-v0044: {ADDRESS}:{PORT} -> {sys.argv[2]} "
                     f"({FROM_PREFIX} -> {TO_PREFIX})\n")
    sys.stderr.flush()
    server.serve_forever()
