import CTAP2

/// CTAP2 canonical CBOR and the CTAP2 messages built on it.
enum CTAP2Targets {
    static let all = [cbor, ctap2Request, ctap2Response, authenticatorData]

    /// `CBOR.decode`: it only accepts canonical CBOR, so whatever decodes re-encodes to the input.
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
        "ctap2-request", "CTAP2Request(bytes:) (makeCredential, getAssertion, getInfo, selection, others); encode gives the input back",
        seeds: { [[0x04], [0x0B]] }
    ) { input in
        guard let request = try? CTAP2Request(bytes: input) else { return .rejected }
        return FuzzTarget.check(request.encode() == input, "request \(input.fuzzHex) re-encodes as \(request.encode().fuzzHex)")
    }

    /// `CTAP2Response(bytes:)`, then the payload as each typed response a client parses.
    static let ctap2Response = FuzzTarget(
        "ctap2-response",
        "CTAP2Response(bytes:), then the payload as makeCredential, getAssertion and getInfo responses; each re-encodes to its input",
        seeds: { [[0x00], [0x2E]] }
    ) { input in
        guard let response = try? CTAP2Response(bytes: input) else { return .rejected }
        guard response.encode() == input else {
            return .violation("response \(input.fuzzHex) re-encodes as \(response.encode().fuzzHex)")
        }
        guard let payload = response.payload else { return .accepted }
        let canonical = CBOR.encode(payload)
        if let typed = try? MakeCredentialResponse(cbor: payload), typed.encode() != canonical {
            return .violation("makeCredential response \(canonical.fuzzHex) re-encodes as \(typed.encode().fuzzHex)")
        }
        if let typed = try? GetAssertionResponse(cbor: payload), typed.encode() != canonical {
            return .violation("getAssertion response \(canonical.fuzzHex) re-encodes as \(typed.encode().fuzzHex)")
        }
        if let typed = try? AuthenticatorGetInfoResponse(cbor: payload), typed.encode() != canonical {
            return .violation("getInfo response \(canonical.fuzzHex) re-encodes as \(typed.encode().fuzzHex)")
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
