import Foundation

/// How a relying party's HTTP API runs a WebAuthn ceremony: a small declarative description that
/// both `hybrid-sim desktop --rp-url` (the client) and `hybrid-sim rp` (a local server) follow.
/// Docs/RELYING_PARTY.md describes the format; the built-in ones are `RelyingPartyProfile.builtIn`.
///
/// Templates (`path`, `body`, `successBody`) use `{placeholders}`: `{user}` (the account name,
/// `--user`), `{credential}` (the `PublicKeyCredential` JSON object), `{clientData}` and
/// `{attestation}` (standard base64 of `clientDataJSON` / `attestationObject`, Okta's form),
/// `{credentialId}` (base64url) and, on the server side, `{userId}` (the user handle, base64url).
/// A string that is exactly one placeholder is replaced by the value itself (an object for
/// `{credential}`).
public struct RelyingPartyProfile: Sendable, Hashable, Codable {
    /// One HTTP call.
    public struct Endpoint: Sendable, Hashable, Codable {
        /// `GET` or `POST`.
        public var method: String
        /// The path and query, e.g. `/registration_initialize?user_name={user}`.
        public var path: String
        /// The JSON body template; `nil`: no body.
        public var body: JSONValue?

        /// The placeholder names the path and the body use (`user`, `credential`, …).
        var placeholders: Set<String> { JSONValue.placeholders(in: path).union(body?.placeholders ?? []) }
    }

    /// What counts as the relying party accepting the result.
    public struct Success: Sendable, Hashable, Codable {
        /// Accepted HTTP statuses.
        public var status: [Int]
        /// A member of the answer that must be `true` (`verified`), if any.
        public var member: String?
        /// What `hybrid-sim rp` answers on success (a template); `nil`: `{"verified": true}`.
        public var body: JSONValue?
    }

    /// One ceremony (registration or authentication).
    public struct Ceremony: Sendable, Hashable, Codable {
        /// Fetches the options.
        public var options: Endpoint
        /// Posts the result.
        public var verify: Endpoint
        /// How the verdict reads.
        public var success: Success
    }

    /// The profile's name (`--rp-profile NAME`).
    public var name: String
    /// One line: which server this is.
    public var summary: String
    /// Headers sent with every call; `${VARIABLE}` is taken from the environment. `hybrid-sim rp`
    /// answers 401 to a call missing any of these headers.
    public var headers: [String: String]?
    /// Whether the server keeps the ceremony in a cookie session (the client then keeps cookies).
    public var cookies: Bool?
    /// How `user.id` is written in the creation options. Default base64url.
    public var userIdEncoding: UserIdEncoding?
    /// The shape `hybrid-sim rp` sends options in (the client recognises any). Default bare.
    public var optionsShape: WebAuthnOptionsShape?
    /// Members `hybrid-sim rp` adds next to the options (Okta's `expiresAt`, `_links`).
    public var optionsExtras: [String: JSONValue]?
    /// Registration; `nil` when the API has none.
    public var registration: Ceremony?
    /// Authentication; `nil` when the API has none (Okta MyAccount only enrols).
    public var authentication: Ceremony?
    /// Facts about the real server this profile could not confirm.
    public var unconfirmed: [String]?

    /// The ceremony for a request, or a clear error.
    public func ceremony(registration wantsRegistration: Bool) throws(ProgramFailure) -> Ceremony {
        guard let ceremony = wantsRegistration ? registration : authentication else {
            throw ProgramFailure(
                .badInput,
                "the \(name) profile has no \(wantsRegistration ? "registration (--request mc)" : "sign-in (--request ga)")"
            )
        }
        return ceremony
    }

    /// Reads a profile: a built-in name, or a JSON file.
    ///
    /// - Throws: ``ProgramFailure`` `badInput` naming the problem.
    public static func load(_ nameOrPath: String) throws(ProgramFailure) -> RelyingPartyProfile {
        if let builtIn = builtIn[nameOrPath] { return builtIn }
        guard nameOrPath.contains("/") || nameOrPath.hasSuffix(".json") || nameOrPath == "-" else {
            // Relying parties whose options are read but not served (Docs/RELYING_PARTY.md).
            let readOnly = ["forgerock": "ForgeRock AM answers inside an authentication tree"]
            let note = readOnly[nameOrPath.lowercased()].map {
                " (\($0): it has no endpoint profile; give its callbacks document to desktop --options)"
            } ?? ""
            throw ProgramFailure(
                .badInput,
                "unknown relying-party profile \(nameOrPath): use one of \(builtInNames.joined(separator: ", ")) or a JSON file\(note)")
        }
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(nameOrPath)  // not Foundation's: /dev/zero or <(sleep 100) would never end
        } catch {
            throw ProgramFailure(.badInput, "cannot read the profile \(nameOrPath): \(error)")
        }
        return try parse(Data(bytes), source: nameOrPath)
    }

    /// Decodes and checks a profile document.
    public static func parse(_ data: Data, source: String) throws(ProgramFailure) -> RelyingPartyProfile {
        // The strict reader first, as for options: a repeated member, nesting past 32 (which
        // `Decodable` would take seconds over) or bytes that are not UTF-8 are named, not decoded.
        do {
            _ = try JSONValue.read(JSONValue.withoutByteOrderMark(data), subject: "not JSON")
        } catch {
            throw ProgramFailure(.badInput, "\(source) is not a relying-party profile: \(error.reason)")
        }
        let profile: RelyingPartyProfile
        do {
            profile = try WebAuthnJSONCoding.decode(RelyingPartyProfile.self, from: data)
        } catch {
            throw ProgramFailure(.badInput, "\(source) is not a relying-party profile: \(error)")
        }
        try profile.validate(source: source)
        return profile
    }

    /// The names of the built-in profiles.
    public static var builtInNames: [String] { builtIn.keys.sorted() }

    /// Checks methods, paths and placeholders.
    func validate(source: String) throws(ProgramFailure) {
        func bad(_ message: String) -> ProgramFailure { ProgramFailure(.badInput, "\(source): \(message)") }
        guard registration != nil || authentication != nil else { throw bad("neither registration nor authentication") }
        if optionsShape == .forgeRock { throw bad("optionsShape forgeRock can be read but not served; use bare, publicKey or options") }
        let known: Set<String> = ["user", "credential", "clientData", "attestation", "credentialId", "userId"]
        for (label, ceremony) in [("registration", registration), ("authentication", authentication)] {
            guard let ceremony else { continue }
            for (part, endpoint) in [("options", ceremony.options), ("verify", ceremony.verify)] {
                guard ["GET", "POST"].contains(endpoint.method) else {
                    throw bad("\(label).\(part).method must be GET or POST, not \(endpoint.method)")
                }
                guard endpoint.path.hasPrefix("/") else { throw bad("\(label).\(part).path must start with /") }
                if let unknown = endpoint.placeholders.subtracting(known).sorted().first {
                    throw bad("\(label).\(part) uses the unknown placeholder {\(unknown)}")
                }
            }
            guard !ceremony.success.status.isEmpty else { throw bad("\(label).success.status is empty") }
        }
    }
}
