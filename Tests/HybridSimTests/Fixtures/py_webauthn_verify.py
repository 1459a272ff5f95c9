#!/usr/bin/env python3
"""Verifies a HybridSim credential with py_webauthn (an independent relying-party library).

Reads one JSON object on stdin:
  {"kind": "registration" | "authentication", "credential": <PublicKeyCredential JSON>,
   "challenge": <base64url>, "origin": "...", "rpId": "...",
   "publicKey": <base64url COSE key, authentication only>, "signCount": <int, authentication only>,
   "rootCertificates": {<fmt>: [<PEM root>, ...]} (registration only, optional: trust anchors for x5c)}
Prints {"verified": true, "credentialId", "publicKey", "signCount", "fmt", "aaguid"} and exits 0, or prints the
library's error on stderr and exits 1. Exits 3 when py_webauthn is not installed.
"""
import json
import sys

try:
    from webauthn import verify_authentication_response, verify_registration_response
    from webauthn.helpers import base64url_to_bytes, bytes_to_base64url
except ImportError as error:  # pragma: no cover
    print(f"py_webauthn is not installed: {error}", file=sys.stderr)
    sys.exit(3)


def main() -> int:
    request = json.load(sys.stdin)
    credential = json.dumps(request["credential"])
    challenge = base64url_to_bytes(request["challenge"])
    try:
        if request["kind"] == "registration":
            verified = verify_registration_response(
                credential=credential,
                expected_challenge=challenge,
                expected_origin=request["origin"],
                expected_rp_id=request["rpId"],
                require_user_verification=request.get("requireUserVerification", False),
                pem_root_certs_bytes_by_fmt={
                    fmt: [pem.encode() for pem in pems]
                    for fmt, pems in request.get("rootCertificates", {}).items()
                },
            )
            out = {
                "verified": True,
                "credentialId": bytes_to_base64url(verified.credential_id),
                "publicKey": bytes_to_base64url(verified.credential_public_key),
                "signCount": verified.sign_count,
                "fmt": getattr(verified.fmt, "value", verified.fmt),
                "aaguid": verified.aaguid,
            }
        else:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=challenge,
                expected_origin=request["origin"],
                expected_rp_id=request["rpId"],
                credential_public_key=base64url_to_bytes(request["publicKey"]),
                credential_current_sign_count=request.get("signCount", 0),
                require_user_verification=request.get("requireUserVerification", False),
            )
            out = {
                "verified": True,
                "credentialId": bytes_to_base64url(verified.credential_id),
                "signCount": verified.new_sign_count,
            }
    except Exception as error:  # py_webauthn raises its own exception types
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
