import CTAP2
import HybridCore
import HybridRuntime

/// The linked-phone wire values (Docs/LINKING.md): the push channel's two messages, the client
/// payload a desktop's contact request carries, the listen token and the listen request's headers.
///
/// The push messages are read with the strict canonical CBOR decoder and keep every key, so what
/// parses re-encodes to the input. The client payload ignores keys it does not know (as Chromium's
/// phone does), so for it the canonical bytes are the re-encoding: a fixed point.
enum LinkingTargets {
    static let all = [pushMessage, pushRefusal, clientPayload, listenToken, pushChannelHeaders]

    static let tunnelID = [UInt8](repeating: 0x0A, count: HybridConstants.tunnelIDSize)
    static let payload = ClientPayload(
        pairingID: Array(1...8), clientNonce: Array(0x20...0x2F), requestType: .getAssertion)
    /// Fixed listen tokens (never secret: fuzzing only).
    static let tokens = (UInt8(1)...3).map { ListenToken(bytes: [UInt8](repeating: $0, count: ListenToken.size))! }

    /// `PushMessage(bytes:)` (relay → phone on the push channel): the encoding gives the input back.
    static let pushMessage = FuzzTarget(
        "push-message", "PushMessage(bytes:) (relay → phone push); encoded gives the input back",
        seeds: {
            [
                PushMessage(tunnelID: tunnelID, routingID: [0x2A, 0, 0], clientPayload: payload.cbor).encoded,
                PushMessage(tunnelID: tunnelID, routingID: [1, 2, 3], clientPayload: []).encoded,
            ]
        }
    ) { input in
        guard let message = try? PushMessage(bytes: input) else { return .rejected }
        return FuzzTarget.check(
            message.encoded == input && (try? PushMessage(bytes: message.encoded)) == message,
            "push message \(input.fuzzHex) re-encodes as \(message.encoded.fuzzHex)")
    }

    /// `PushRefusal(bytes:)` (phone → relay): the encoding gives the input back, and a reason that
    /// parsed is never cut.
    static let pushRefusal = FuzzTarget(
        "push-refusal", "PushRefusal(bytes:) (phone → relay); encoded gives the input back, the reason within 120 bytes",
        seeds: {
            [
                PushRefusal(tunnelID: tunnelID, reason: "the person declined").encoded,
                PushRefusal(tunnelID: tunnelID, reason: "contact ID revoked", revoked: true).encoded,
                PushRefusal(tunnelID: tunnelID, reason: String(repeating: "é", count: 60)).encoded,
            ]
        }
    ) { input in
        guard let refusal = try? PushRefusal(bytes: input) else { return .rejected }
        return FuzzTarget.check(
            refusal.encoded == input && refusal.reason.utf8.count <= PushRefusal.maxReasonBytes
                && (try? PushRefusal(bytes: refusal.encoded)) == refusal,
            "push refusal \(input.fuzzHex) re-encodes as \(refusal.encoded.fuzzHex)")
    }

    /// `ClientPayload(cbor:)` (the `X-caBLE-Client-Payload` CBOR the phone gets in a push): the
    /// re-encoding is a fixed point, and is the input when the map has only keys 1–3.
    static let clientPayload = FuzzTarget(
        "client-payload",
        "ClientPayload(cbor:) (linked contact request payload); the re-encoding is a fixed point, the input itself for a map of keys 1–3",
        seeds: {
            [
                payload.cbor,
                ClientPayload(pairingID: Array(repeating: 0xFF, count: 8), clientNonce: Array(repeating: 0, count: 16), requestType: .makeCredential).cbor,
                CBOR.encode([1: .bytes(Array(1...8)), 2: .bytes(Array(0x20...0x2F)), 3: .text("ga"), 4: .text("newer desktop")]),
            ]
        }
    ) { input in
        guard let parsed = try? ClientPayload(cbor: input) else { return .rejected }
        let canonical = parsed.cbor
        guard (try? ClientPayload(cbor: canonical)) == parsed else {
            return .violation("client payload \(input.fuzzHex) re-encodes as \(canonical.fuzzHex), which parses differently")
        }
        let onlyKnownKeys = (try? CBOR.decode(input))?.mapValue?.count == 3
        return FuzzTarget.check(
            !onlyKnownKeys || canonical == input, "client payload \(input.fuzzHex) re-encodes as \(canonical.fuzzHex)")
    }

    /// `ListenToken(base64URL:)`: only the canonical spelling of 32 bytes is a token.
    static let listenToken = FuzzTarget(
        "listen-token", "ListenToken(base64URL:) (listen request header, phone-link.json); base64URL gives the text back",
        seeds: { tokens.map { Array($0.base64URL.utf8) } + [Array(ListenToken(bytes: Array(0...31))!.base64URL.utf8)] }
    ) { input in
        let text = String(decoding: input, as: UTF8.self)
        guard let token = ListenToken(base64URL: text) else { return .rejected }
        return FuzzTarget.check(
            Array(token.base64URL.utf8) == input && token.bytes.count == ListenToken.size && token.contactID.count == 32,
            "listen token \(input.fuzzHex) is spelled \(token.base64URL)")
    }

    /// The relay's reading of a listen request's headers: `PushChannel.listenToken(headerValues:)`
    /// and `PushChannel.revoked(headerValues:)`, on the input split at line feeds (one header value
    /// each; HTTP cannot carry a line feed inside one).
    static let pushChannelHeaders = FuzzTarget(
        "push-channel-headers",
        "PushChannel.listenToken(headerValues:) and .revoked(headerValues:) (the relay's listen request headers); a token is the one value's canonical spelling, at most 64 revoked, one per non-empty item",
        seeds: {
            [
                Array(tokens[0].base64URL.utf8),
                Array((" " + tokens[0].base64URL + "\t").utf8),
                Array(tokens.map(\.base64URL).joined(separator: ", ").utf8),
                Array((tokens[0].base64URL + "\n" + tokens[1].base64URL + "," + tokens[2].base64URL).utf8),
            ]
        }
    ) { input in
        let values = input.split(separator: 0x0A, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        let token = PushChannel.listenToken(headerValues: values)
        if let token {
            let spelled = values.first?.fuzzTrimmed(isBlank)
            guard values.count == 1, spelled == token.base64URL else {
                return .violation("listen token \(token.base64URL) read from \(input.fuzzHex)")
            }
        }
        let revoked = PushChannel.revoked(headerValues: values)
        if let revoked {
            let items = values.flatMap { $0.split(separator: ",") }.map { $0.fuzzTrimmed(isBlank) }
            let expected = items.filter { !$0.isEmpty }.compactMap { ListenToken(base64URL: $0)?.contactID }
            guard revoked.count <= PushChannel.maxRevoked, revoked == expected,
                expected.count == items.filter({ !$0.isEmpty }).count
            else {
                return .violation("\(revoked.count) revoked contact IDs read from \(input.fuzzHex)")
            }
        }
        return token != nil || revoked?.isEmpty == false ? .accepted : .rejected
    }
}

/// A space or a tab (what the relay trims around header items).
private func isBlank(_ character: Character) -> Bool { character == " " || character == "\t" }

extension StringProtocol {
    /// The text without leading and trailing characters that `isTrimmed` picks.
    func fuzzTrimmed(_ isTrimmed: (Character) -> Bool) -> String {
        String(drop(while: isTrimmed).reversed().drop(while: isTrimmed).reversed())
    }
}
