#!/usr/bin/env python3
"""An HTTPS server on a free loopback port with a fresh self-signed certificate (made with the
`cryptography` package that py_webauthn depends on), answering every request with 200 `{}`.

Used to show that `hybrid-sim desktop --rp-url https://…` speaks TLS and refuses a certificate it
cannot trust. Prints "listening on https://127.0.0.1:PORT" on stdout. Exits 3 without `cryptography`.
"""
import datetime
import os
import ssl
import sys
import tempfile
from http.server import BaseHTTPRequestHandler, HTTPServer

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID
except ImportError as error:  # pragma: no cover
    print(f"cryptography is not installed: {error}", file=sys.stderr)
    sys.exit(3)

key = ec.generate_private_key(ec.SECP256R1())
name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
now = datetime.datetime.now(datetime.timezone.utc)
certificate = (
    x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
    .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
    .not_valid_after(now + datetime.timedelta(hours=1)).sign(key, hashes.SHA256())
)
directory = tempfile.mkdtemp()
cert_path, key_path = os.path.join(directory, "cert.pem"), os.path.join(directory, "key.pem")
with open(cert_path, "wb") as handle:
    handle.write(certificate.public_bytes(serialization.Encoding.PEM))
with open(key_path, "wb") as handle:
    handle.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_POST = do_GET


server = HTTPServer(("127.0.0.1", 0), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(cert_path, key_path)
server.socket = context.wrap_socket(server.socket, server_side=True)
print(f"listening on https://127.0.0.1:{server.server_address[1]}", flush=True)
try:
    server.serve_forever()
except Exception as error:  # a client aborting the handshake
    print(f"stopped: {error}", file=sys.stderr)
