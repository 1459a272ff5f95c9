import CTAP2

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
    /// `authData ‖ clientDataHash` with the credential key. Anything else is rejected.
    package func verify(clientDataHash: [UInt8], credentialKey: COSEKey) throws(WebAuthnJSONError) {
        switch fmt {
        case "none":
            guard attStmt.isEmpty else {
                throw WebAuthnJSONError(.invalidAttestation, "a \"none\" statement must be empty")
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
