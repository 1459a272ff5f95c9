import CTAP2

/// CTAP2 canonical CBOR and the CTAP2 messages built on it.
///
/// The CBOR decoder is strict (only canonical CBOR), so decode-then-encode must give the input
/// back. The message parsers are tolerant of members they do not know (CTAP2 §6: unknown map keys
/// are ignored), so for them the canonical bytes are the re-encoding: it must be a fixed point
/// (parse it again, get the same value and the same bytes).
enum CTAP2Targets {
    static let all = [cbor, ctap2Request, ctap2Response, authenticatorData]

    /// `CBOR.decode`: whatever decodes re-encodes to the input.
    static let cbor = FuzzTarget(
        "cbor", "CBOR.decode (CTAP2 canonical); decode then encode gives the input back",
        seeds: { [CBOR.encode(.map([1: .text("a"), 2: .array([.bytes([1, 2]), .negative(0), .bool(true)])]))] }
    ) { input in
        guard let value = try? CBOR.decode(input) else { return .rejected }
        return FuzzTarget.check(CBOR.encode(value) == input, "\(input.fuzzHex) decodes but re-encodes differently")
    }

    /// `CTAP2Request(bytes:)`: a command byte and its parameters (makeCredential and getAssertion
    /// parsed fully).
    static let ctap2Request = FuzzTarget(
        "ctap2-request",
        "CTAP2Request(bytes:) (makeCredential, getAssertion, getInfo, selection, others); the re-encoding parses to the same request and bytes",
        seeds: { [[0x04], [0x0B]] }
    ) { input in
        guard let request = try? CTAP2Request(bytes: input) else { return .rejected }
        let canonical = request.encode()
        let again = try? CTAP2Request(bytes: canonical)
        return FuzzTarget.check(
            again == request && again?.encode() == canonical, "request \(input.fuzzHex) re-encodes as \(canonical.fuzzHex), not a fixed point")
    }

    /// A typed response parsed from `payload` (if it parses) must re-encode to a fixed point.
    static func fixedPoint<T: CTAP2CBORCodable>(_ type: T.Type, _ payload: CBORValue) -> String? {
        guard let typed = try? T(cbor: payload) else { return nil }
        let canonical = typed.encode()
        let again = try? T(bytes: canonical)
        return again == typed && again?.encode() == canonical
            ? nil : "\(T.self) \(CBOR.encode(payload).fuzzHex) re-encodes as \(canonical.fuzzHex), not a fixed point"
    }

    /// `CTAP2Response(bytes:)`, then the payload as each typed response a client parses.
    static let ctap2Response = FuzzTarget(
        "ctap2-response",
        "CTAP2Response(bytes:), then the payload as makeCredential, getAssertion and getInfo responses; the envelope gives the input back (an error's status alone), each typed re-encoding is a fixed point",
        seeds: { [[0x00], [0x2E]] }
    ) { input in
        guard let response = try? CTAP2Response(bytes: input) else { return .rejected }
        guard response.encode() == (response.status == .ok ? input : Array(input.prefix(1))) else {
            return .violation("response \(input.fuzzHex) re-encodes as \(response.encode().fuzzHex)")
        }
        guard let payload = response.payload else { return .accepted }
        if let problem = fixedPoint(MakeCredentialResponse.self, payload) ?? fixedPoint(GetAssertionResponse.self, payload)
            ?? fixedPoint(AuthenticatorGetInfoResponse.self, payload)
        {
            return .violation(problem)
        }
        return .accepted
    }

    /// `AuthenticatorData(bytes:)` (flags, attested credential data, extensions).
    static let authenticatorData = FuzzTarget(
        "authenticator-data", "AuthenticatorData(bytes:) (attested credential data, extensions); bytes gives the input back",
        seeds: { [[UInt8](repeating: 0xAB, count: 32) + [0x01, 0, 0, 0, 7]] }
    ) { input in
        guard let data = try? AuthenticatorData(bytes: input) else { return .rejected }
        return FuzzTarget.check(data.bytes == input, "authenticator data \(input.fuzzHex) re-encodes as \(data.bytes.fuzzHex)")
    }
}
