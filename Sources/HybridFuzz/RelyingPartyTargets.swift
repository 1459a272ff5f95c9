import CTAP2
import Foundation
import HybridSim

/// What the desktop reads from a relying party besides its WebAuthn options (those are
/// ``WebAuthnJSONTargets``): the verdict body of `desktop --rp-url`, and relying-party profiles
/// (`--rp-profile FILE`, Docs/RELYING_PARTY.md).
enum RelyingPartyTargets {
    static let all = [relyingPartyAnswer, relyingPartyProfile]

    /// The members of every object in `value`, counted (nested ones too).
    static func memberCount(_ value: JSONReader.Value) -> Int {
        switch value {
        case .array(let elements): return elements.reduce(0) { $0 + memberCount($1) }
        case .object(let members): return members.reduce(members.count) { $0 + memberCount($1.value) }
        default: return 0
        }
    }

    /// The members of every object in `value`, counted (nested ones too).
    static func memberCount(_ value: JSONValue) -> Int {
        switch value {
        case .array(let elements): return elements.reduce(0) { $0 + memberCount($1) }
        case .object(let members): return members.values.reduce(members.count) { $0 + memberCount($1) }
        default: return 0
        }
    }

    /// The verdict body `RelyingPartyClient.submit` reads: `JSONValue.parse` after a UTF-8
    /// byte-order mark, the success member, and `RelyingPartyClient.shorten` for the message line.
    /// What parses keeps every member the strict reader read (a member dropped silently would let
    /// two readers of one body disagree) and survives being written and parsed again; the message
    /// line holds no control, line-breaking or bidi character.
    static let relyingPartyAnswer = FuzzTarget(
        "rp-answer",
        "a relying party's verdict body (JSONValue.parse, the success member, RelyingPartyClient.shorten); no member lost, a JSON round trip, one printable message line",
        seeds: {
            [
                Array(#"{"verified":true}"#.utf8),
                [0xEF, 0xBB, 0xBF] + Array(#"{"verified":false,"error":{"message":"Unexpected \"challenge\"","codes":[1,2.5e3,-0]}}"#.utf8),
                Array("<html>\n<body>502 Bad Gateway\u{1B}[2J</body>\n</html>\n".utf8),
            ]
        }
    ) { input in
        let line = RelyingPartyClient.shorten(input)
        if let scalar = line.unicodeScalars.first(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) || [0x2028, 0x2029, 0x202E, 0x2067].contains($0.value) }) {
            return .violation("the message line holds U+\(String(scalar.value, radix: 16, uppercase: true)) from \(input.fuzzHex)")
        }
        let body = input.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(input.dropFirst(3)) : input
        guard let value = JSONValue.parse(body) else { return .rejected }
        _ = value["verified"] == .bool(true)
        if let strict = try? JSONReader.parse(body, maxDepth: JSONValue.maxDepth, subject: "JSON"), memberCount(strict) != memberCount(value) {
            return .violation("\(memberCount(strict)) members read, \(memberCount(value)) kept, from \(input.fuzzHex)")
        }
        return FuzzTarget.check(JSONValue.parse(value.data) == value, "body \(input.fuzzHex) does not survive a JSON round trip")
    }

    static let profileSeed = #"""
        {"name": "custom", "summary": "a test server", "headers": {"Authorization": "SSWS ${TOKEN}"}, "cookies": true,
         "userIdEncoding": "base64url", "optionsShape": "publicKey", "optionsExtras": {"expiresAt": "2026-01-01T00:00:00Z", "n": [1, 2.5, null]},
         "registration": {"options": {"method": "POST", "path": "/options?user={user}", "body": {"username": "{user}", "deep": [[{"a": true}]]}},
                          "verify": {"method": "POST", "path": "/verify", "body": "{credential}"},
                          "success": {"status": [200, 201], "member": "verified", "body": {"ok": true, "id": "{credentialId}"}}},
         "unconfirmed": ["nothing"]}
        """#

    /// `RelyingPartyProfile.parse` (`--rp-profile FILE`): a profile that parses, written as JSON,
    /// parses to the same profile.
    static let relyingPartyProfile = FuzzTarget(
        "rp-profile", "RelyingPartyProfile.parse (--rp-profile FILE); the profile survives a JSON round trip",
        seeds: {
            // Sorted keys: the same seed files on every run.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return [Array(profileSeed.utf8)]
                + RelyingPartyProfile.builtInNames.compactMap { name in
                    (try? encoder.encode(RelyingPartyProfile.builtIn[name])).map { Array($0) }
                }
        }
    ) { input in
        guard let profile = try? RelyingPartyProfile.parse(Data(input), source: "fuzz") else { return .rejected }
        guard let json = try? JSONEncoder().encode(profile) else {
            return .violation("profile \(input.fuzzHex) parses but cannot be encoded")
        }
        let again = try? RelyingPartyProfile.parse(json, source: "fuzz")
        return FuzzTarget.check(again == profile, "profile \(input.fuzzHex) does not survive a JSON round trip")
    }
}
