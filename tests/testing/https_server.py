#!/usr/bin/python3
"""A tiny HTTPS server for the TLS client's tests (tests/unit/tls_client_test.cc), on Python's ssl.

Usage: https_server.py --cert PEM --key PEM [--client-ca PEM] [--max-tls 1.2] [--plain]
                       [--keep-alive | --close-after-answer | --close-header-only |
                        --close-on-second-request | --cut-second-answer]

Listens on 127.0.0.1, a port of the kernel's choice, and prints "PID PORT" once it accepts. Every
GET is answered 200 with a JSON body: {"path": ..., "resumed": true when the TLS session was
resumed, "client_cn": the client certificate's CN or null, "connection": the number of this
connection (1 for the first accepted), "request": the number of this request on it}. With
--client-ca a client certificate signed by that CA is required (mTLS). Every answer says
"Connection: close" and the connection is closed; with --keep-alive the connection is kept (unless
the request says close); with --close-after-answer the answer does not say close but the connection
is closed after it, as by a server whose keep-alive timeout is shorter than the client's; with
--close-header-only the answer says close but the connection is kept (a client must not reuse it:
the server may close it at any time); with --close-on-second-request the connection is kept, but
the second request on it is read and the connection closed without an answer; with
--cut-second-answer the answer to the second request stops after its headers and part of its body
and the connection is closed. With --plain it speaks plain HTTP (no TLS; the certificate options
are then ignored), for the plain side of flurry's one HTTP exchange (tls/http_client.h), which
keeps connections by the same rules. Stops on SIGTERM.
"""
import argparse
import http.server
import json
import os
import ssl
import sys
import threading

CONNECTION_MODE = "close"  # or one of the options: "keep-alive", "close-after-answer", ...


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    accepted = 0
    accepted_lock = threading.Lock()

    def setup(self):
        super().setup()
        with Handler.accepted_lock:
            Handler.accepted += 1
            self.connection_number = Handler.accepted
        self.requests = 0

    def do_GET(self):
        self.requests += 1
        if CONNECTION_MODE == "close-on-second-request" and self.requests == 2:
            self.close_connection = True
            return
        if CONNECTION_MODE == "cut-second-answer" and self.requests == 2:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut\"")
            self.close_connection = True
            return
        tls = hasattr(self.connection, "getpeercert")
        peer = self.connection.getpeercert() if tls else None
        cn = None
        for rdn in (peer or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        body = json.dumps({"path": self.path, "resumed": tls and self.connection.session_reused,
                           "client_cn": cn, "connection": self.connection_number,
                           "request": self.requests}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if CONNECTION_MODE in ("close", "close-header-only"):
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        # Sending "Connection: close" (or a request saying it) has set close_connection.
        if CONNECTION_MODE == "close-after-answer":
            self.close_connection = True
        elif CONNECTION_MODE == "close-header-only":
            self.close_connection = False

    def log_message(self, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a refused handshake is what some tests want


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--client-ca")
    parser.add_argument("--max-tls", choices=["1.2", "1.3"], default="1.3")
    parser.add_argument("--plain", action="store_true")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--keep-alive", action="store_true")
    mode.add_argument("--close-after-answer", action="store_true")
    mode.add_argument("--close-header-only", action="store_true")
    mode.add_argument("--close-on-second-request", action="store_true")
    mode.add_argument("--cut-second-answer", action="store_true")
    args = parser.parse_args()
    global CONNECTION_MODE
    if args.keep_alive:
        CONNECTION_MODE = "keep-alive"
    elif args.close_after_answer:
        CONNECTION_MODE = "close-after-answer"
    elif args.close_header_only:
        CONNECTION_MODE = "close-header-only"
    elif args.close_on_second_request:
        CONNECTION_MODE = "close-on-second-request"
    elif args.cut_second_answer:
        CONNECTION_MODE = "cut-second-answer"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    if args.max_tls == "1.2":
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if args.client_ca:
        context.load_verify_locations(args.client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    server = Server(("127.0.0.1", 0), Handler)
    if not args.plain:
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print(os.getpid(), server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
