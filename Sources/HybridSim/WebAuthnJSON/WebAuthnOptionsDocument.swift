import CTAP2
import Foundation
import HybridRuntime

/// How an options document from a relying party's server was shaped.
public enum WebAuthnOptionsShape: String, Sendable, Hashable, CaseIterable, Codable {
    /// The options themselves (`PublicKeyCredentialCreationOptionsJSON` or `…RequestOptionsJSON`):
    /// py_webauthn's `options_to_json`, SimpleWebAuthn.
    case bare
    /// `{"publicKey": {…}}`, the `CredentialCreationOptions` / `CredentialRequestOptions` argument of
    /// `navigator.credentials.create()/get()`: go-webauthn, webauthn-rs, java-webauthn-server, Hanko.
    /// Sibling members (`mediation`, `signal`, …) are ignored: they steer the browser's UI, not the
    /// authenticator.
    case publicKey
    /// `{"options": {…}, …}`: Okta MyAccount's enrolment answer (`expiresAt` and `_links` beside it).
    case options
    /// ForgeRock AM's WebAuthn `MetadataCallback` data (or the callbacks document holding it),
    /// converted as ForgeRock's JavaScript SDK does (`ForgeRockMetadata`). Read only: `hybrid-sim rp`
    /// does not serve it.
    case forgeRock

    /// "bare options", "a {\"publicKey\": …} wrapper", "an {\"options\": …} wrapper".
    public var summary: String {
        switch self {
        case .bare: return "bare options"
        case .publicKey: return "a {\"publicKey\": …} wrapper"
        case .options: return "an {\"options\": …} wrapper"
        case .forgeRock: return "ForgeRock WebAuthn callback metadata"
        }
    }

    /// Reads a value, refusing an unknown one with the allowed ones listed (a profile's `optionsShape`).
    public init(from decoder: any Decoder) throws { self = try DecodingWords.enumeration(Self.self, from: decoder) }

    /// What goes before an options member's name to give its path in the document: `publicKey.`
    /// or `options.` in a wrapper, nothing for bare options (and ForgeRock's, which are converted).
    var memberPath: String {
        switch self {
        case .bare, .forgeRock: return ""
        case .publicKey, .options: return "\(rawValue)."
        }
    }
}

/// How `user.id` is written in creation options.
public enum UserIdEncoding: String, Sendable, Hashable, CaseIterable, Codable {
    /// Unpadded (or padded) base64url, as WebAuthn L3 JSON says.
    case base64url
    /// A plain string whose UTF-8 bytes are the user handle: Okta MyAccount (its iOS sample converts
    /// `user.id` with `.data(using: .utf8)`) and ForgeRock (the JS SDK uses the characters of the
    /// base64 text as the handle).
    case utf8

    /// Reads a value, refusing an unknown one with the allowed ones listed (a profile's `userIdEncoding`).
    public init(from decoder: any Decoder) throws { self = try DecodingWords.enumeration(Self.self, from: decoder) }
}

/// Options read from a relying party's document, with the shape that was recognised.
public struct ParsedWebAuthnOptions<Options: Sendable>: Sendable {
    /// The validated options.
    public var options: Options
    /// The shape the document had.
    public var shape: WebAuthnOptionsShape
    /// Members next to the options that a browser would act on but this client ignores
    /// (e.g. `mediation` in a `publicKey` wrapper), for a note.
    public var ignoredSiblings: [String]
    /// ForgeRock metadata that says `supportsJsonResponse`: the tree takes the outcome as JSON
    /// (`ForgeRockMetadata.jsonOutcome(legacy:)`).
    public var forgeRockJSONResponse = false
}

/// Reads the options shapes relying-party servers actually send (``WebAuthnOptionsShape``).
///
/// Recognition: a top-level `challenge` means bare options; otherwise an object-valued `publicKey`
/// or `options` member is the wrapper; an object with neither and none of the options' own members
/// (a server's `{"status", "data"}` envelope) is refused with its member names, not guessed at. Errors name the member with its full path
/// (`publicKey.user.id`). Unknown members are ignored at every level, as browsers do.
enum WebAuthnOptionsDocument {
    /// The package's strict reader first (``JSONValue/parse(_:)``'s rules): options come from a
    /// relying party's answer or a file, and `JSONSerialization` alone keeps the last of repeated
    /// members (`"rpId"` twice: the second would be signed for), nests without a useful bound and
    /// reports invalid UTF-8 in Foundation's words.
    static func checkStrictly(_ json: some Collection<UInt8>) throws(WebAuthnJSONError) {
        if let encoding = otherEncoding(json) {
            throw WebAuthnJSONError(
                .invalidJSON,
                "the document is \(encoding), not UTF-8: JSON between systems is UTF-8 (RFC 8259 §8.1), "
                    + "and a browser's response.json() reads nothing else")
        }
        if json.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            throw WebAuthnJSONError(.invalidJSON, "the document is empty (no JSON at all: an empty answer, or HTTP 204?)")
        }
        do {
            _ = try JSONValue.read(json, subject: "not JSON")
        } catch {
            throw WebAuthnJSONError(.invalidJSON, error.reason)
        }
    }

    /// "UTF-16 (…)" or "UTF-32 (…)" when the document begins like one (a byte-order mark, or the
    /// NUL bytes a first ASCII character has there), else `nil`.
    static func otherEncoding(_ json: some Collection<UInt8>) -> String? {
        let head = Array(json.prefix(4))
        if head.starts(with: [0x00, 0x00, 0xFE, 0xFF]) || head.starts(with: [0xFF, 0xFE, 0x00, 0x00]) {
            return "UTF-32 (it begins with a byte-order mark)"
        }
        if head.starts(with: [0xFE, 0xFF]) || head.starts(with: [0xFF, 0xFE]) {
            return "UTF-16 (it begins with the byte-order mark \(Hex.encode(head.prefix(2), uppercase: true)))"
        }
        if head.count >= 2, head[0] == 0 || head[1] == 0 {
            return "UTF-16 or UTF-32 (it has NUL bytes where its text begins)"
        }
        return nil
    }

    /// Decodes `T` from a document of any recognised shape.
    static func parse<T: Decodable & Sendable>(
        _ document: some Collection<UInt8>, as type: T.Type, userIdEncoding: UserIdEncoding
    ) throws(WebAuthnJSONError) -> ParsedWebAuthnOptions<T> {
        let json = JSONValue.withoutByteOrderMark(document)
        try checkStrictly(json)
        let data = Data(json)
        let object: [String: Any]
        do {
            guard let top = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) as? [String: Any]
            else { throw WebAuthnJSONError(.invalidJSON, "expected a JSON object at the top level") }
            object = top
        } catch let error as WebAuthnJSONError {
            throw error
        } catch {
            // Let the decoder produce its precise syntax error.
            _ = try WebAuthnJSONCoding.decode(T.self, from: data)
            throw WebAuthnJSONError(.invalidJSON, "\(error)")
        }
        let forgeRock = try ForgeRockMetadata.options(from: object)
        let shape = forgeRock == nil ? try recognise(object) : .forgeRock
        let inner: [String: Any]
        switch shape {
        case .bare: inner = object
        case .publicKey: inner = object["publicKey"] as? [String: Any] ?? [:]
        case .options: inner = object["options"] as? [String: Any] ?? [:]
        case .forgeRock: inner = forgeRock ?? [:]
        }
        // ForgeRock's user handle is already the UTF-8 of its userId text.
        let rewritten = convertedAsWebIDL(
            shape == .forgeRock
                ? inner : try rewriteUserId(inner, encoding: userIdEncoding, path: shape.memberPath)
        )
        let document: [String: Any] = shape == .bare || shape == .forgeRock ? rewritten : [shape.rawValue: rewritten]
        let bytes: Data
        do {
            bytes = try JSONSerialization.data(withJSONObject: document)
        } catch {
            throw WebAuthnJSONError(.invalidJSON, "\(error)")
        }
        let options: T
        switch shape {
        case .bare, .forgeRock: options = try WebAuthnJSONCoding.decode(T.self, from: bytes)
        case .publicKey: options = try WebAuthnJSONCoding.decode(PublicKeyEnvelope<T>.self, from: bytes).publicKey
        case .options: options = try WebAuthnJSONCoding.decode(OptionsEnvelope<T>.self, from: bytes).options
        }
        let siblings = shape == .publicKey ? object.keys.filter { $0 != "publicKey" }.sorted() : []
        return ParsedWebAuthnOptions(
            options: options, shape: shape, ignoredSiblings: siblings,
            forgeRockJSONResponse: shape == .forgeRock && ForgeRockMetadata.supportsJSONResponse(object))
    }

    /// The registration-only members (`rp`, `user`, `pubKeyCredParams`) the document's options
    /// hold, in any shape, when they mark it as registration options: `pubKeyCredParams`, or both
    /// `rp` and `user` (a sign-in server that adds a stray `user` is not taken for one). Empty
    /// otherwise, and for a document that does not parse. Valid or not: registration options that
    /// fail to parse (no ES256, say) are still not sign-in options.
    static func registrationMembers(_ document: some Collection<UInt8>) -> [String] {
        let json = JSONValue.withoutByteOrderMark(document)
        guard otherEncoding(json) == nil,
            let object = (try? JSONSerialization.jsonObject(with: Data(json))) as? [String: Any]
        else { return [] }
        let inner: [String: Any]
        if let forgeRock = (try? ForgeRockMetadata.options(from: object)) ?? nil {
            inner = forgeRock
        } else {
            switch (try? recognise(object)) ?? .bare {
            case .publicKey: inner = object["publicKey"] as? [String: Any] ?? [:]
            case .options: inner = object["options"] as? [String: Any] ?? [:]
            case .bare, .forgeRock: inner = object
            }
        }
        let present = ["rp", "user", "pubKeyCredParams"].filter { inner[$0] != nil }
        return present.contains("pubKeyCredParams") || (present.contains("rp") && present.contains("user")) ? present : []
    }

    /// Members only WebAuthn options have (creation or request options): a top-level object with
    /// one of them is read as bare options, and decoding names what else is missing.
    static let optionsMembers: Set<String> = [
        "challenge", "rp", "user", "pubKeyCredParams", "excludeCredentials", "authenticatorSelection", "attestation",
        "rpId", "allowCredentials", "userVerification",
    ]

    /// The shape of a top-level object.
    ///
    /// - Throws: `wrongType` for a wrapper member that is not an object; `unrecognisedDocument` for
    ///   an object with no options member and no wrapper (a server's own envelope such as
    ///   `{"status", "data"}`, which is not guessed at), naming its members.
    static func recognise(_ object: [String: Any]) throws(WebAuthnJSONError) -> WebAuthnOptionsShape {
        if object["challenge"] != nil { return .bare }
        for shape in [WebAuthnOptionsShape.publicKey, .options] {
            guard let value = object[shape.rawValue] else { continue }
            guard value is [String: Any] else {
                throw WebAuthnJSONError(.wrongType, "\(shape.rawValue) must be an object")
            }
            return shape
        }
        guard object.keys.contains(where: optionsMembers.contains) else {
            let names = object.keys.sorted()
            let shown = names.prefix(10).map { "\"\(PeerText.printable($0, limit: 40))\"" }.joined(separator: ", ")
            let members =
                names.isEmpty
                ? "it has no members" : "its top-level members are \(shown)\(names.count > 10 ? ", and \(names.count - 10) more" : "")"
            throw WebAuthnJSONError(
                .unrecognisedDocument,
                "the document is neither bare options (no challenge, rp, user, rpId or allowCredentials at its top level) "
                    + "nor a recognised wrapper ({\"publicKey\": …}, {\"options\": …}, ForgeRock callbacks or their data); \(members)")
        }
        return .bare  // decoding then names what is missing
    }

    /// `timeout` and `hints` as a browser converts them (WebIDL): `timeout` is an `unsigned long`,
    /// so a number or a string of one (`"60000"`, ToNumber) is truncated and taken modulo 2³²
    /// (`45000.7` is 45000, −5 is 4294967291), which the desktop then clamps to its 1 s…1 h as
    /// Chrome clamps to its range; `hints` is a `sequence<DOMString>`, so a number in it is its
    /// text (`42` is `"42"`, an unknown hint, ignored). Text that is no number (`"60s"`), which a
    /// browser reads as 0, its shortest wait, is left for the decoder to refuse, naming it: a
    /// server's mistake, not a wait of a second nobody asked for; so is a Bool or an object.
    private static func convertedAsWebIDL(_ options: [String: Any]) -> [String: Any] {
        var options = options
        if let hints = options["hints"] as? [Any] {
            options["hints"] = hints.map { hint -> Any in
                guard !(hint is Bool), !(hint is String), let number = hint as? Double, number.isFinite else { return hint }
                return number.rounded(.towardZero) == number && abs(number) < 1e15 ? String(Int64(number)) : "\(number)"
            }
        }
        guard let raw = options["timeout"], !(raw is Bool) else { return options }
        let value: Double
        if let number = raw as? Double {
            value = number
        } else if let text = raw as? String, let number = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            value = number
        } else {
            return options
        }
        // WebIDL ConvertToInt for unsigned long: NaN and infinities are 0; truncate; modulo 2³².
        guard value.isFinite else {
            options["timeout"] = 0
            return options
        }
        let modulus = 4_294_967_296.0
        var wrapped = value.rounded(.towardZero).truncatingRemainder(dividingBy: modulus)
        if wrapped < 0 { wrapped += modulus }
        options["timeout"] = Int(wrapped)
        return options
    }

    /// With ``UserIdEncoding/utf8``, replaces a string `user.id` by the base64url of its UTF-8 bytes.
    private static func rewriteUserId(
        _ options: [String: Any], encoding: UserIdEncoding, path: String
    ) throws(WebAuthnJSONError) -> [String: Any] {
        guard encoding == .utf8, var user = options["user"] as? [String: Any], let id = user["id"] else { return options }
        guard let text = id as? String else {
            throw WebAuthnJSONError(.wrongType, "\(path)user.id must be a string")
        }
        user["id"] = Base64URL.encode(Array(text.utf8))
        var out = options
        out["user"] = user
        return out
    }
}

private struct PublicKeyEnvelope<T: Decodable>: Decodable { var publicKey: T }
private struct OptionsEnvelope<T: Decodable>: Decodable { var options: T }

extension PublicKeyCredentialCreationOptionsJSON {
    /// Reads creation options in any shape a relying party's server sends (bare, `{"publicKey": …}`,
    /// `{"options": …}`), validates them and says which shape it was.
    ///
    /// - Parameters:
    ///   - json: the document as the server sent it (UTF-8 JSON).
    ///   - userIdEncoding: how `user.id` is written (``UserIdEncoding/utf8`` for Okta).
    /// - Throws: ``WebAuthnJSONError`` naming the member with its path in the document.
    public static func parse(
        document json: some Collection<UInt8>, userIdEncoding: UserIdEncoding = .base64url
    ) throws(WebAuthnJSONError) -> ParsedWebAuthnOptions<Self> {
        let parsed = try WebAuthnOptionsDocument.parse(json, as: Self.self, userIdEncoding: userIdEncoding)
        try parsed.options.validate(at: parsed.shape.memberPath)
        return parsed
    }
}

extension PublicKeyCredentialRequestOptionsJSON {
    /// Reads request options in any shape a relying party's server sends (bare, `{"publicKey": …}`,
    /// `{"options": …}`), validates them and says which shape it was.
    ///
    /// - Throws: ``WebAuthnJSONError`` naming the member with its path in the document.
    public static func parse(document json: some Collection<UInt8>) throws(WebAuthnJSONError) -> ParsedWebAuthnOptions<Self> {
        let parsed = try WebAuthnOptionsDocument.parse(json, as: Self.self, userIdEncoding: .base64url)
        try parsed.options.validate(at: parsed.shape.memberPath)
        return parsed
    }
}
