import Foundation

extension RelyingPartyProfile {
    /// The profiles shipped with HybridSim, by name. Each is the same JSON a user can write in a
    /// file (Docs/RELYING_PARTY.md shows them); sources for every endpoint are in that document.
    package static let builtIn: [String: RelyingPartyProfile] = {
        var profiles: [String: RelyingPartyProfile] = [:]
        for (name, json) in builtInDocuments {
            do {
                profiles[name] = try parse(Data(json.utf8), source: "built-in profile \(name)")
            } catch {
                preconditionFailure("\(error)")
            }
        }
        return profiles
    }()

    /// The built-in profile documents.
    static let builtInDocuments: [(String, String)] = [
        (
            "simplewebauthn",
            #"""
            {
              "name": "simplewebauthn",
              "summary": "SimpleWebAuthn's example server (example/index.ts): GET /generate-…-options, POST /verify-…, challenge kept in an express-session cookie",
              "cookies": true,
              "registration": {
                "options": {"method": "GET", "path": "/generate-registration-options"},
                "verify": {"method": "POST", "path": "/verify-registration", "body": "{credential}"},
                "success": {"status": [200], "member": "verified"}
              },
              "authentication": {
                "options": {"method": "GET", "path": "/generate-authentication-options"},
                "verify": {"method": "POST", "path": "/verify-authentication", "body": "{credential}"},
                "success": {"status": [200], "member": "verified"}
              },
              "unconfirmed": ["The example server registers one fixed user (no account name in the request); --user is not sent."]
            }
            """#
        ),
        (
            "py_webauthn",
            #"""
            {
              "name": "py_webauthn",
              "summary": "A py_webauthn-style server: POST /generate-…-options {username} returns options_to_json output, POST /verify-… {username, credential}",
              "registration": {
                "options": {"method": "POST", "path": "/generate-registration-options", "body": {"username": "{user}"}},
                "verify": {"method": "POST", "path": "/verify-registration", "body": {"username": "{user}", "credential": "{credential}"}},
                "success": {"status": [200], "member": "verified"}
              },
              "authentication": {
                "options": {"method": "POST", "path": "/generate-authentication-options", "body": {"username": "{user}"}},
                "verify": {"method": "POST", "path": "/verify-authentication", "body": {"username": "{user}", "credential": "{credential}"}},
                "success": {"status": [200], "member": "verified"}
              },
              "unconfirmed": ["py_webauthn is a library, not a server: these routes follow its README's generate_…/verify_… functions; a real app names its own routes (copy this profile and edit the paths)."]
            }
            """#
        ),
        (
            "hanko",
            #"""
            {
              "name": "hanko",
              "summary": "Hanko's example web app: GET /registration_initialize?user_name=…, POST /registration_finalize, GET /authentication_initialize, POST /authentication_finalize; go-webauthn {\"publicKey\": …} options",
              "optionsShape": "publicKey",
              "registration": {
                "options": {"method": "GET", "path": "/registration_initialize?user_name={user}"},
                "verify": {"method": "POST", "path": "/registration_finalize", "body": "{credential}"},
                "success": {"status": [200], "body": {"credential_id": "{credentialId}", "user_id": "{userId}"}}
              },
              "authentication": {
                "options": {"method": "GET", "path": "/authentication_initialize"},
                "verify": {"method": "POST", "path": "/authentication_finalize", "body": "{credential}"},
                "success": {"status": [200], "body": {"credential_id": "{credentialId}", "user_id": "{userId}"}}
              },
              "unconfirmed": ["The current Hanko backend serves /webauthn/registration/initialize|finalize and /webauthn/login/initialize|finalize instead (copy this profile and change the paths); the GET method of the seed app's initialize calls is assumed."]
            }
            """#
        ),
        (
            "okta",
            #"""
            {
              "name": "okta",
              "summary": "Okta MyAccount WebAuthn enrolment: POST /idp/myaccount/webauthn/registration returns {options, expiresAt, _links}; POST /idp/myaccount/webauthn {clientData, attestation} in standard base64 answers 201",
              "headers": {"Accept": "application/json; okta-version=1.0.0", "Authorization": "Bearer ${OKTA_ACCESS_TOKEN}"},
              "userIdEncoding": "utf8",
              "optionsShape": "options",
              "optionsExtras": {"expiresAt": "{expiresAt}", "_links": {"enroll": {"href": "/idp/myaccount/webauthn", "hints": {"allow": ["POST"]}}}},
              "registration": {
                "options": {"method": "POST", "path": "/idp/myaccount/webauthn/registration"},
                "verify": {"method": "POST", "path": "/idp/myaccount/webauthn", "body": {"clientData": "{clientData}", "attestation": "{attestation}"}},
                "success": {"status": [201], "body": {"id": "{credentialId}", "status": "ACTIVE"}}
              },
              "unconfirmed": ["Whether Okta wants standard base64 or base64url for clientData/attestation (its widget sends standard base64; this profile does too).", "MyAccount only enrols: signing in with the passkey goes through Okta's sign-in flow (IdX), which has no public shape here."]
            }
            """#
        ),
    ]
}
