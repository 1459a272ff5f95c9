import CTAP2

/// Renders CTAP2 and hybrid CBOR maps as annotated lines: each top-level key with its name from the
/// structure's definition (CTAP 2.2 §6 for the CTAP2 messages, PROTOCOL §7–8 for the hybrid ones),
/// values in CBOR diagnostic notation with long byte strings shortened.
enum CBORAnnotation {
    /// Which structure a map is, for its key names.
    enum Schema {
        case getInfoResponse, makeCredentialRequest, makeCredentialResponse, getAssertionRequest
        case getAssertionResponse, postHandshake, linking, update, generic

        var names: [Int: String] {
            switch self {
            case .getInfoResponse:
                return [1: "versions", 2: "extensions", 3: "aaguid", 4: "options", 5: "maxMsgSize", 6: "pinUvAuthProtocols",
                        7: "maxCredentialCountInList", 8: "maxCredentialIdLength", 9: "transports", 10: "algorithms",
                        11: "maxSerializedLargeBlobArray", 12: "forcePINChange", 13: "minPINLength", 14: "firmwareVersion",
                        15: "maxCredBlobLength", 16: "maxRPIDsForSetMinPINLength", 17: "preferredPlatformUvAttempts",
                        18: "uvModality", 19: "certifications", 20: "remainingDiscoverableCredentials"]
            case .makeCredentialRequest:
                return [1: "clientDataHash", 2: "rp", 3: "user", 4: "pubKeyCredParams", 5: "excludeList", 6: "extensions",
                        7: "options", 8: "pinUvAuthParam", 9: "pinUvAuthProtocol", 10: "enterpriseAttestation"]
            case .makeCredentialResponse:
                return [1: "fmt", 2: "authData", 3: "attStmt", 4: "epAtt", 5: "largeBlobKey"]
            case .getAssertionRequest:
                return [1: "rpId", 2: "clientDataHash", 3: "allowList", 4: "extensions", 5: "options", 6: "pinUvAuthParam",
                        7: "pinUvAuthProtocol"]
            case .getAssertionResponse:
                return [1: "credential", 2: "authData", 3: "signature", 4: "user", 5: "numberOfCredentials",
                        6: "userSelected", 7: "largeBlobKey"]
            case .postHandshake:
                return [1: "getInfo", 2: "linking", 3: "features"]
            case .linking:
                return [1: "contactID", 2: "pairingID", 3: "linkSecret", 4: "authenticatorPublicKey", 5: "name",
                        6: "handshakeSignature", 999: "fromNewImplementation"]
            case .update:
                return [0: "padding", 1: "linking"]
            case .generic:
                return [:]
            }
        }
    }

    /// One line per top-level entry of `value` (a map), or one line for anything else.
    static func lines(_ value: CBORValue, schema: Schema) -> [String] {
        guard let map = value.mapValue else { return [diagnostic(value)] }
        let names = schema.names
        return CBOR.canonicallySorted(map).flatMap { entry -> [String] in
            let name = entry.key.intValue.flatMap { names[$0] }
            let key = name.map { "\(diagnostic(entry.key)) (\($0))" } ?? diagnostic(entry.key)
            var text = "\(key): \(diagnostic(entry.value))"
            guard name == "authData", let bytes = entry.value.bytesValue, let authData = try? AuthenticatorData(bytes: bytes) else {
                return [text]
            }
            // Every flag by name (UP, UV, BE, BS, AT, ED), and the byte for what has no name.
            text += " = rpIdHash \(short(authData.rpIdHash)), flags 0x\(Hex.encode([authData.flags.rawValue])) \(authData.flags)"
                + ", signCount \(authData.signCount)"
            return [text] + authenticatorDataLines(authData)
        }
    }

    /// What follows the counter in authenticator data (CTAP2's own parser, `AuthenticatorData`):
    /// the attested credential data a registration carries (AT), and the extensions (ED).
    static func authenticatorDataLines(_ authData: AuthenticatorData) -> [String] {
        var lines: [String] = []
        if let attested = authData.attestedCredentialData {
            lines.append("  aaguid: \(short(attested.aaguid))")
            lines.append("  credentialId: \(short(attested.credentialId))" + (attested.credentialId.count > 16 ? "" : " (\(attested.credentialId.count) bytes)"))
            let key = (try? CBOR.decode(attested.credentialPublicKey)).map(diagnostic) ?? short(attested.credentialPublicKey)
            lines.append("  credentialPublicKey (COSE_Key): \(key)")
        }
        if let extensions = authData.extensions {
            lines.append("  extensions: \(diagnostic(.map(Dictionary(uniqueKeysWithValues: extensions.map { (CBORValue.text($0.key), $0.value) }))))")
        }
        return lines
    }

    /// Diagnostic notation (RFC 8949 §8) with byte strings over 16 bytes shortened to
    /// `h'first 8…last 4' (N bytes)`.
    static func diagnostic(_ value: CBORValue) -> String {
        switch value {
        case .bytes(let bytes): return short(bytes)
        case .text(let text): return "\"\(text.count > 80 ? String(text.prefix(77)) + "…" : text)\""
        case .array(let items): return "[" + items.map(diagnostic).joined(separator: ", ") + "]"
        case .map(let map):
            return "{" + CBOR.canonicallySorted(map).map { "\(diagnostic($0.key)): \(diagnostic($0.value))" }.joined(separator: ", ") + "}"
        default: return value.description
        }
    }

    /// `h'…'`, shortened beyond 16 bytes.
    static func short(_ bytes: [UInt8]) -> String {
        guard bytes.count > 16 else { return "h'\(Hex.encode(bytes))'" }
        return "h'\(Hex.encode(bytes.prefix(8)))…\(Hex.encode(bytes.suffix(4)))' (\(bytes.count) bytes)"
    }
}
