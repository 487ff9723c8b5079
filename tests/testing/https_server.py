#!/usr/bin/python3
"""A tiny HTTPS server for the TLS client's tests (tests/unit/tls_client_test.cc), on Python's ssl.

Usage: https_server.py --cert PEM --key PEM [--client-ca PEM] [--max-tls 1.2]

Listens on 127.0.0.1, a port of the kernel's choice, and prints "PID PORT" once it accepts. Every
GET is answered 200 with a JSON body: {"path": ..., "resumed": true when the TLS session was
resumed, "client_cn": the client certificate's CN or null}. With --client-ca a client certificate
signed by that CA is required (mTLS). Stops on SIGTERM.
"""
import argparse
import http.server
import json
import os
import ssl
import sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        peer = self.connection.getpeercert()
        cn = None
        for rdn in (peer or {}).get("subject", ()):
            for key, value in rdn:
                if key == "commonName":
                    cn = value
        body = json.dumps({"path": self.path, "resumed": self.connection.session_reused,
                           "client_cn": cn}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

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
    args = parser.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    if args.max_tls == "1.2":
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    if args.client_ca:
        context.load_verify_locations(args.client_ca)
        context.verify_mode = ssl.CERT_REQUIRED
    server = Server(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(os.getpid(), server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
