import CTAP2
import Crypto
import X509

/// An attestation object read as a relying party reads it: canonical CBOR
/// `{"fmt": tstr, "attStmt": map, "authData": bstr}` with nothing else.
package struct AttestationObject {
    package let fmt: String
    package let attStmt: [CBORValue: CBORValue]
    package let authData: [UInt8]

    package init(bytes: [UInt8]) throws(WebAuthnJSONError) {
        let value: CBORValue
        do {
            value = try CBOR.decode(bytes)
        } catch {
            throw WebAuthnJSONError(.invalidAttestation, "attestationObject is not canonical CBOR: \(error)")
        }
        guard let map = value.mapValue, map.count == 3,
            let fmt = map[.text("fmt")]?.textValue,
            let attStmt = map[.text("attStmt")]?.mapValue,
            let authData = map[.text("authData")]?.bytesValue
        else {
            throw WebAuthnJSONError(.invalidAttestation, "attestationObject is not {fmt, attStmt, authData}")
        }
        self.fmt = fmt
        self.attStmt = attStmt
        self.authData = authData
    }

    /// `none`: the statement is empty. `packed` (self): `{"alg": -7, "sig": bstr}` verifying over
    /// `authData ‖ clientDataHash` with the credential key; `packed` (full): `{"alg": -7, "sig",
    /// "x5c": [bstr, …]}` verifying with the P-256 key of the first certificate (read by
    /// swift-certificates; the certificate rules and the chain are the relying party's business, not
    /// this shape check's). Anything else is rejected.
    package func verify(clientDataHash: [UInt8], credentialKey: COSEKey) throws(WebAuthnJSONError) {
        switch fmt {
        case "none":
            guard attStmt.isEmpty else {
                throw WebAuthnJSONError(.invalidAttestation, "a \"none\" statement must be empty")
            }
        case "packed" where attStmt[.text("x5c")] != nil:
            guard attStmt.count == 3, attStmt[.text("alg")]?.intValue == COSEAlgorithmIdentifier.es256.rawValue,
                let sig = attStmt[.text("sig")]?.bytesValue,
                let first = attStmt[.text("x5c")]?.arrayValue?.first?.bytesValue
            else {
                throw WebAuthnJSONError(.invalidAttestation, "a packed full statement must be exactly {alg: -7, sig, x5c: [bstr, …]}")
            }
            guard let certificate = try? Certificate(derEncoded: first), let key = P256.Signing.PublicKey(certificate.publicKey)
            else {
                throw WebAuthnJSONError(.invalidAttestation, "x5c[0] is not an X.509 certificate with a P-256 key")
            }
            do {
                try ES256.verify(
                    signature: sig, over: ES256.signedData(authenticatorData: authData, clientDataHash: clientDataHash),
                    publicKey: key)
            } catch {
                throw WebAuthnJSONError(.invalidAttestation, "packed full signature: \(error.reason)")
            }
        case "packed":
            guard attStmt.count == 2, attStmt[.text("alg")]?.intValue == COSEAlgorithmIdentifier.es256.rawValue,
                let sig = attStmt[.text("sig")]?.bytesValue
            else {
                throw WebAuthnJSONError(.invalidAttestation, "a packed self statement must be exactly {alg: -7, sig}")
            }
            do {
                try ES256.verify(
                    signature: sig, authenticatorData: authData, clientDataHash: clientDataHash,
                    publicKey: credentialKey)
            } catch {
                throw WebAuthnJSONError(.invalidAttestation, "packed signature: \(error.reason)")
            }
        default:
            throw WebAuthnJSONError(.invalidAttestation, "attestation format \"\(fmt)\" is not checked here")
        }
    }
}
