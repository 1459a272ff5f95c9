import CTAP2
import HybridTestSupport
import Testing

/// One case of `Vectors/cbor.json`.
struct CBORCase: Decodable, Sendable, CustomTestStringConvertible {
    let name: String
    let source: String
    let hexString: String
    /// CBORValue.description of the decoded item (positive cases; optional).
    let diagnostic: String?
    /// A `CBORError.Code` raw value (negative cases).
    let expectError: String?

    enum CodingKeys: String, CodingKey {
        case name, source, diagnostic, expectError
        case hexString = "hex"
    }

    var bytes: [UInt8] { hex(hexString) }
    var testDescription: String { name }

    static let all: [CBORCase] = (try? Vectors.load("cbor", as: VectorFile<CBORCase>.self).vectors) ?? []
    static var positive: [CBORCase] { all.filter { $0.expectError == nil } }
    static var negative: [CBORCase] { all.filter { $0.expectError != nil } }
}

/// One case of `Vectors/ctap2.json`.
struct CTAP2Case: Decodable, Sendable, CustomTestStringConvertible {
    let name: String
    let source: String
    /// Which parser: getAssertionRequest, getAssertionResponse, makeCredentialRequest,
    /// makeCredentialResponse, getInfoResponse, authenticatorData, coseKey, clientData,
    /// es256Signature, ctap2Request, ctap2Response.
    let kind: String
    let hexString: String
    /// Decoded fields to check (hex for bytes; comma-separated lists).
    let expect: [String: String]?
    /// A `CTAP2Error.Code` raw value (negative cases).
    let expectError: String?

    enum CodingKeys: String, CodingKey {
        case name, source, kind, expect, expectError
        case hexString = "hex"
    }

    var bytes: [UInt8] { hex(hexString) }
    var testDescription: String { name }

    /// An expected field, or a recorded issue and an empty string.
    func field(_ key: String) -> String {
        guard let value = expect?[key] else {
            Issue.record("vector \(name) has no expect.\(key)")
            return ""
        }
        return value
    }

    /// An expected hex field as bytes.
    func bytes(_ key: String) -> [UInt8] { hex(field(key)) }

    /// An expected comma-separated list.
    func list(_ key: String) -> [String] { field(key).split(separator: ",").map(String.init) }

    static let all: [CTAP2Case] = (try? Vectors.load("ctap2", as: VectorFile<CTAP2Case>.self).vectors) ?? []
    static var positive: [CTAP2Case] { all.filter { $0.expectError == nil } }
    static var negative: [CTAP2Case] { all.filter { $0.expectError != nil } }

    /// The case called `name` (records an issue when absent).
    static func named(_ name: String) throws -> CTAP2Case {
        try #require(all.first { $0.name == name }, "no vector \(name) in Vectors/ctap2.json")
    }

    /// Runs the parser for ``kind`` and returns what it re-encodes to (for signatures: the input,
    /// after verifying it). makeCredential responses with `expect.clientDataHash` also have their
    /// attestation verified.
    func decodeAndReencode() throws(CTAP2Error) -> [UInt8] {
        let input = bytes
        switch kind {
        case "getAssertionRequest": return try GetAssertionRequest(bytes: input).encode()
        case "getAssertionResponse": return try GetAssertionResponse(bytes: input).encode()
        case "makeCredentialRequest": return try MakeCredentialRequest(bytes: input).encode()
        case "makeCredentialResponse":
            let response = try MakeCredentialResponse(bytes: input)
            if let hash = expect?["clientDataHash"] {
                try response.verifyAttestation(clientDataHash: hex(hash))
            }
            return response.encode()
        case "getInfoResponse": return try AuthenticatorGetInfoResponse(bytes: input).encode()
        case "authenticatorData": return try AuthenticatorData(bytes: input).bytes
        case "coseKey": return try COSEKey(bytes: input).encode()
        case "clientData": return try CollectedClientData(json: input).json
        case "ctap2Request": return try CTAP2Request(bytes: input).encode()
        case "ctap2Response": return try CTAP2Response(bytes: input).encode()
        case "es256Signature":
            let key = try COSEKey(x963Representation: bytes("publicKey"))
            try ES256.verify(
                signature: input, authenticatorData: bytes("authData"), clientDataHash: bytes("clientDataHash"),
                publicKey: key)
            return input
        default:
            Issue.record("unknown vector kind \(kind) in \(name)")
            return []
        }
    }
}
