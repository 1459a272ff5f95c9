#!/usr/bin/env python3
"""A relying-party server built on py_webauthn (an independent WebAuthn library) with the routes of
HybridSim's `py_webauthn` profile, for testing `hybrid-sim desktop --rp-url` against it.

  POST /generate-registration-options   {"username"}                -> options_to_json(...)
  POST /verify-registration             {"username", "credential"}  -> {"verified": true} or 400
  POST /generate-authentication-options {"username"}                -> options_to_json(...)
  POST /verify-authentication           {"username", "credential"}  -> {"verified": true} or 400

Usage: py_webauthn_server.py [RP_ID] [ORIGIN]. Listens on a free loopback port and prints
"listening on http://127.0.0.1:PORT" on stdout; one line per verdict on stderr. Exits 3 when
py_webauthn is not installed.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

try:
    from webauthn import (
        generate_authentication_options,
        generate_registration_options,
        options_to_json,
        verify_authentication_response,
        verify_registration_response,
    )
    from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
    from webauthn.helpers.structs import PublicKeyCredentialDescriptor
except ImportError as error:  # pragma: no cover
    print(f"py_webauthn is not installed: {error}", file=sys.stderr)
    sys.exit(3)

RP_ID = sys.argv[1] if len(sys.argv) > 1 else "example.com"
ORIGIN = sys.argv[2] if len(sys.argv) > 2 else f"https://{RP_ID}"
pending = {}  # (kind, username) -> challenge
credentials = {}  # credential id (base64url) -> {"username", "public_key", "sign_count"}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        username = body.get("username", "")
        if self.path == "/generate-registration-options":
            options = generate_registration_options(rp_id=RP_ID, rp_name="py_webauthn fixture", user_name=username or "alice")
            pending[("reg", username)] = options.challenge
            return self.answer(200, options_to_json(options))
        if self.path == "/generate-authentication-options":
            allow = [PublicKeyCredentialDescriptor(id=base64url_to_bytes(cid))
                     for cid, entry in credentials.items() if username and entry["username"] == username]
            options = generate_authentication_options(rp_id=RP_ID, allow_credentials=allow)
            pending[("auth", username)] = options.challenge
            return self.answer(200, options_to_json(options))
        try:
            credential = body["credential"]
            if self.path == "/verify-registration":
                verified = verify_registration_response(
                    credential=credential, expected_challenge=pending.pop(("reg", username)),
                    expected_origin=ORIGIN, expected_rp_id=RP_ID)
                cid = bytes_to_base64url(verified.credential_id)
                credentials[cid] = {"username": username or "alice", "public_key": verified.credential_public_key,
                                    "sign_count": verified.sign_count}
            elif self.path == "/verify-authentication":
                entry = credentials[credential["rawId"]]
                verified = verify_authentication_response(
                    credential=credential, expected_challenge=pending.pop(("auth", username)),
                    expected_origin=ORIGIN, expected_rp_id=RP_ID,
                    credential_public_key=entry["public_key"], credential_current_sign_count=entry["sign_count"])
                entry["sign_count"] = verified.new_sign_count
                cid = credential["rawId"]
            else:
                return self.answer(404, {"error": f"no route {self.path}"})
        except Exception as error:  # py_webauthn's own exception types, or a missing challenge
            print(f"rejected {self.path}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
            return self.answer(400, {"verified": False, "error": f"{type(error).__name__}: {error}"})
        print(f"accepted {self.path} for {cid}", file=sys.stderr, flush=True)
        return self.answer(200, {"verified": True})


server = HTTPServer(("127.0.0.1", 0), Handler)
print(f"listening on http://127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
