import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// One HTTP request as the relying-party server sees it.
public struct RelyingPartyHTTPRequest: Sendable {
    /// `GET`, `POST`, …
    public var method: String
    /// The path without the query, as sent: percent-encoding is kept (`/a%2Db` is not `/a-b`), so
    /// an endpoint is matched only by the path a client means.
    public var path: String
    /// Query parameters (percent-decoded).
    public var query: [String: String]
    /// Query parameters whose value is not UTF-8 once percent-decoded (`user_name=Zo%EB`, Latin-1):
    /// they are not in ``query``, and a request that needs one is refused rather than read as
    /// giving no value.
    public var undecodableQuery: Set<String>
    /// Header names in lower case.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]

    /// Creates a request from a request target such as `/registration_initialize?user_name=alice`.
    public init(method: String, target: String, headers: [String: String] = [:], body: [UInt8] = []) {
        self.method = method
        let components = URLComponents(string: target)
        self.path = components?.percentEncodedPath ?? target
        var query: [String: String] = [:]
        var undecodable: Set<String> = []
        for item in components?.percentEncodedQueryItems ?? [] {
            let name = item.name.removingPercentEncoding ?? item.name
            guard let value = item.value else {
                query[name] = ""
                continue
            }
            if let decoded = value.removingPercentEncoding { query[name] = decoded } else { undecodable.insert(name) }
        }
        self.query = query
        self.undecodableQuery = undecodable
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { _, last in last })
        self.body = body
    }
}

/// One HTTP response from the relying-party server.
public struct RelyingPartyHTTPResponse: Sendable {
    /// The status.
    public var status: Int
    /// Extra headers (`Set-Cookie`, `Allow`).
    public var headers: [(String, String)] = []
    /// The JSON body.
    public var body: JSONValue
    /// A verdict on a posted result, logged as such (`rejected a sign-in: …`).
    var isVerdict = false

    /// A JSON error answer `{"verified": false, "error": message}`.
    static func error(_ status: Int, _ message: String) -> Self {
        Self(status: status, body: .object(["verified": .bool(false), "error": .string(message)]))
    }
}

/// `hybrid-sim rp`'s relying party: serves a profile's endpoints, issues options and verifies the
/// results with `RelyingParty` (HybridCore), keeping credentials in a ``RelyingPartyStore``.
///
/// Each options call issues a fresh 32-byte challenge, remembered for ``pendingLifetime`` and usable
/// once (a failed verification uses it up too). With a cookie profile the challenge is also bound
/// to the `hybrid-sim-session` cookie set with the options.
public actor RelyingPartyService {
    private struct Pending {
        var registration: Bool
        var user: PublicKeyCredentialUserEntity?
        var allowList: [[UInt8]]
        var session: String?
        var issued: UInt64
    }

    /// The profile served.
    public let profile: RelyingPartyProfile
    /// The relying party that verifies.
    public let relyingParty: RelyingParty
    /// How long an issued challenge stays usable, in seconds.
    public let pendingLifetime: UInt64 = 300
    /// The most challenges pending at once; issuing one more drops the oldest.
    public static let maximumPending = 10_000
    var store: RelyingPartyStore
    private var pending: [[UInt8]: Pending] = [:]
    /// The pending challenges in the order they were issued (some already used), from `pendingStart`.
    private var pendingOrder: [[UInt8]] = []
    private var pendingStart = 0
    /// Challenges recently used or expired, so a late or repeated post is told which (bounded: the
    /// oldest ``spentMemory`` are forgotten and then read as unknown).
    private var spent = RecentMemory<[UInt8], Spent>(capacity: spentMemory)
    static let spentMemory = 1024
    private let random: RandomSource
    private let now: @Sendable () -> UInt64
    private let log: @Sendable (String) -> Void
    /// Refused requests, and verdicts on results that name no challenge pending here, within a budget.
    let refusals: RefusalLog

    /// Creates the service.
    ///
    /// - Parameters:
    ///   - profile: the endpoints and body shapes to serve.
    ///   - relyingParty: the RP ID and origin credentials are checked against.
    ///   - store: where credentials are kept; saved after every accepted registration or sign-in.
    ///   - random: the source of challenges and user handles.
    ///   - now: the clock (seconds since the Unix epoch) that expires pending challenges.
    ///   - log: one line per verdict, and per refused request within a budget (the CLI prints
    ///     them on stderr).
    public init(
        profile: RelyingPartyProfile, relyingParty: RelyingParty, store: RelyingPartyStore,
        random: RandomSource = .system, now: @escaping @Sendable () -> UInt64 = { UInt64(Date().timeIntervalSince1970) },
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.profile = profile
        self.relyingParty = relyingParty
        self.store = store
        self.random = random
        self.now = now
        self.log = log
        self.refusals = RefusalLog(log)
    }

    /// The credentials stored so far.
    public var credentials: [RegisteredCredential] { store.credentials }

    /// The largest body an options endpoint takes: its body names at most an account (of at most
    /// ``ProgramDefaults/maximumUserNameBytes``); the result endpoints take up to
    /// ``RelyingPartyHTTPServer/maximumBodyBytes``.
    public static let maximumOptionsBodyBytes = 16 * 1024

    /// Answers one request. A refusal (a status of 400 or more) is logged (`refused POST /path: 401
    /// …`) unless it is a verdict on a result, which has its own line.
    ///
    /// The body is read (JSON parsed) before the request reaches the actor, which only issues and
    /// takes challenges and saves the store: a large body costs its own request time, not every
    /// other request's. One over 16 KiB is parsed on a queue of its own, so that large
    /// bodies wait for one another rather than hold the threads every other request needs.
    public nonisolated func handle(_ request: RelyingPartyHTTPRequest) async -> RelyingPartyHTTPResponse {
        let response = await answer(request)
        if response.status >= 400, !response.isVerdict {
            noteRefusal("\(request.method) \(request.path): \(response.status) \(response.body["error"]?.stringValue ?? "")")
        }
        return response
    }

    /// Logs a refused request (`refused …`), for the HTTP server's own refusals too, within
    /// ``RefusalLog``'s budget (any page in the user's browser can send them in a loop).
    nonisolated func noteRefusal(_ what: String) {
        refusals.note("refused \(what)")
    }

    private nonisolated func answer(_ request: RelyingPartyHTTPRequest) async -> RelyingPartyHTTPResponse {
        for (name, _) in profile.headers ?? [:] where (request.headers[name.lowercased()] ?? "").isEmpty {
            return .error(401, "the \(name) header is missing")
        }
        for (registration, ceremony) in [(true, profile.registration), (false, profile.authentication)] {
            guard let ceremony else { continue }
            if Self.matches(request, ceremony.options) {
                let options = ceremony.options
                let user = await Self.parsing(request.body) { Self.userName(in: request, options) }
                return registration ? await startRegistration(user) : await startAuthentication(user)
            }
            if Self.matches(request, ceremony.verify) {
                let verify = ceremony.verify
                let posted = await Self.parsing(request.body) { PostedResult.read(request.body, endpoint: verify) }
                return await finish(request, posted, ceremony, registration: registration)
            }
        }
        // A known path asked with another method: 405 with the methods it takes (RFC 9110 §15.5.6).
        let methods = Set(endpoints.filter { Self.path(of: $0) == request.path }.map(\.method)).sorted()
        if !methods.isEmpty {
            var response = RelyingPartyHTTPResponse.error(
                405, "\(request.path) takes \(methods.joined(separator: ", ")), not \(request.method), in the \(profile.name) profile")
            response.headers.append(("Allow", methods.joined(separator: ", ")))
            return response
        }
        // The path as the client sent it, cut: a body is no place for 80 KiB of it.
        return .error(404, "no endpoint \(request.method) \(PeerText.printable(request.path, limit: 200)) in the \(profile.name) profile")
    }

    /// Bodies larger than this are parsed on ``parseQueue``; smaller ones where the request is.
    static let inlineParseBytes = 16 * 1024
    /// Where bodies over ``inlineParseBytes`` are parsed, one at a time.
    private static let parseQueue = DispatchQueue(label: "hybrid-sim rp: large request bodies")

    /// `read(body)`'s result, computed on ``parseQueue`` when `body` is over ``inlineParseBytes``.
    private static func parsing<T: Sendable>(_ body: [UInt8], _ read: @escaping @Sendable () -> T) async -> T {
        guard body.count > inlineParseBytes else { return read() }
        return await withCheckedContinuation { continuation in
            parseQueue.async { continuation.resume(returning: read()) }
        }
    }

    /// The largest body the endpoint `request` names takes: ``maximumOptionsBodyBytes`` for an
    /// options endpoint, ``RelyingPartyHTTPServer/maximumBodyBytes`` otherwise.
    nonisolated func bodyLimit(for request: RelyingPartyHTTPRequest) -> Int {
        let options = [profile.registration, profile.authentication].compactMap { $0?.options }
        return options.contains { Self.matches(request, $0) } ? Self.maximumOptionsBodyBytes : RelyingPartyHTTPServer.maximumBodyBytes
    }

    /// Whether the request's method and path name one of the profile's endpoints, whose answer
    /// depends on the body; any other request's answer (404, 405) is known from its head alone.
    nonisolated func routes(_ request: RelyingPartyHTTPRequest) -> Bool {
        endpoints.contains { Self.matches(request, $0) }
    }

    /// Every endpoint the profile serves (options and verify of each ceremony).
    private nonisolated var endpoints: [RelyingPartyProfile.Endpoint] {
        [profile.registration, profile.authentication].compactMap { $0 }.flatMap { [$0.options, $0.verify] }
    }

    private static func matches(_ request: RelyingPartyHTTPRequest, _ endpoint: RelyingPartyProfile.Endpoint) -> Bool {
        request.method == endpoint.method && request.path == path(of: endpoint)
    }

    /// The endpoint's path without its query template.
    private static func path(of endpoint: RelyingPartyProfile.Endpoint) -> String {
        URLComponents(string: endpoint.path)?.percentEncodedPath ?? endpoint.path
    }

    /// The value the request gives where the endpoint's template has `{name}` (a query parameter,
    /// the whole body or a top-level body member); `body` is the request's body, parsed once.
    private static func placeholderValue(
        _ name: String, in request: RelyingPartyHTTPRequest, body: JSONValue?, _ endpoint: RelyingPartyProfile.Endpoint
    ) -> JSONValue? {
        let token = "{\(name)}"
        for item in URLComponents(string: endpoint.path)?.queryItems ?? [] where item.value == token {
            return request.query[item.name].map(JSONValue.string)
        }
        if endpoint.body == .string(token) { return body }
        if let template = endpoint.body?.objectValue, let body {
            for (key, value) in template where value == .string(token) { return body[key] }
        }
        return nil
    }

    /// The account name a request gives for `{user}`: ``UserName/absent`` when it gives none (no
    /// body, or JSON `null`), ``UserName/empty`` for `""`; a 400 when the body that should carry it
    /// is not JSON, or gives another JSON type (a number, an object): a server does not sign in a
    /// default account for a request it cannot read.
    private static func userName(
        in request: RelyingPartyHTTPRequest, _ endpoint: RelyingPartyProfile.Endpoint
    ) -> UserName {
        let carriesUser = endpoint.body?.placeholders.contains("user") == true
        var body: JSONValue? = nil
        if !request.body.isEmpty {
            do {
                body = try JSONValue.read(request.body, subject: "the body is not JSON")
            } catch where carriesUser {
                return .refused(.error(400, error.reason))
            } catch {}
        }
        // A template that names the account in a member of an object: a body of another JSON type
        // (an array, a number) is not a request for the default account.
        if carriesUser, let body, body != .null, endpoint.body?.objectValue != nil, body.objectValue == nil {
            return .refused(.error(400, "the body must be a JSON object (the account name is a member of it), not \(body.brief)"))
        }
        for item in URLComponents(string: endpoint.path)?.queryItems ?? []
        where item.value == "{user}" && request.undecodableQuery.contains(item.name) {
            return .refused(.error(400, "the account name (query parameter \(item.name)) is not UTF-8 text once percent-decoded"))
        }
        guard let value = placeholderValue("user", in: request, body: body, endpoint), value != .null else { return .absent }
        guard let name = value.stringValue else {
            return .refused(.error(400, "the account name must be a JSON string, not \(value.brief)"))
        }
        return name.isEmpty ? .empty : .given(name)
    }

    private enum UserName: Sendable {
        /// No account named: the default one (registration), any passkey (sign-in).
        case absent
        /// `""`: refused for a registration (a script's unset variable would register the default
        /// account), a discoverable sign-in as with none (`desktop --rp-url` sends it so without `--user`).
        case empty
        case given(String)
        case refused(RelyingPartyHTTPResponse)
    }

    // MARK: - Options

    private func startRegistration(_ user: UserName) -> RelyingPartyHTTPResponse {
        let name: String
        switch user {
        case .absent: name = ProgramDefaults.userName
        case .empty:
            return .error(
                400, "the account name is empty: give 1…\(ProgramDefaults.maximumUserNameBytes) bytes of UTF-8, or leave it out (or null) for the default account")
        case .given(let given): name = given
        case .refused(let refusal): return refusal
        }
        guard name.utf8.count <= ProgramDefaults.maximumUserNameBytes else {
            return .error(400, "the account name is longer than \(ProgramDefaults.maximumUserNameBytes) bytes")
        }
        let existing = store.credentials(rpId: relyingParty.id, userName: name)
        let userId = existing.first?.userId ?? newUserId()
        let user = PublicKeyCredentialUserEntity(id: userId, name: name, displayName: name)
        let challenge = random.bytes(32)
        let options = PublicKeyCredentialCreationOptionsJSON(
            rp: PublicKeyCredentialRpEntityJSON(id: relyingParty.id, name: relyingParty.id),
            user: PublicKeyCredentialUserEntityJSON(id: userId, name: name, displayName: name),
            challenge: challenge,
            excludeCredentials: existing.map { PublicKeyCredentialDescriptorJSON(id: $0.credentialId) },
            authenticatorSelection: AuthenticatorSelectionCriteriaJSON(residentKey: "required", userVerification: "preferred"),
            // With trust anchors (--attestation-roots) it wants the statement: a client told "none"
            // drops it (WebAuthn §5.4.7), and the roots would never be used.
            attestation: relyingParty.attestationTrustAnchors == nil ? "none" : "direct"
        )
        var json = JSONValue.parse(WebAuthnJSONCoding.encode(options)) ?? .null
        if profile.userIdEncoding == .utf8, case .object(var members) = json, case .object(var userMembers)? = members["user"] {
            userMembers["id"] = .string(String(decoding: userId, as: UTF8.self))
            members["user"] = .object(userMembers)
            json = .object(members)
        }
        return issue(challenge, Pending(registration: true, user: user, allowList: [], session: nil, issued: now()), json)
    }

    private func startAuthentication(_ user: UserName) -> RelyingPartyHTTPResponse {
        let name: String
        switch user {
        case .absent, .empty: name = ""
        case .given(let given): name = given
        case .refused(let refusal): return refusal
        }
        var allowList: [[UInt8]] = []
        if !name.isEmpty {
            allowList = store.credentials(rpId: relyingParty.id, userName: name).map(\.credentialId)
            guard !allowList.isEmpty else { return .error(404, "no passkey is registered for \(name)") }
        }
        let challenge = random.bytes(32)
        let options = PublicKeyCredentialRequestOptionsJSON(
            challenge: challenge, rpId: relyingParty.id,
            allowCredentials: allowList.isEmpty ? nil : allowList.map { PublicKeyCredentialDescriptorJSON(id: $0) }
        )
        let json = JSONValue.parse(WebAuthnJSONCoding.encode(options)) ?? .null
        return issue(challenge, Pending(registration: false, user: nil, allowList: allowList, session: nil, issued: now()), json)
    }

    /// Remembers the challenge and wraps the options in the profile's shape.
    private func issue(_ challenge: [UInt8], _ entry: Pending, _ options: JSONValue) -> RelyingPartyHTTPResponse {
        var entry = entry
        var headers: [(String, String)] = []
        if profile.cookies == true {
            let session = Base64URL.encode(random.bytes(16))
            entry.session = session
            headers.append(("Set-Cookie", "\(Self.cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict"))
        }
        pending[challenge] = entry
        pendingOrder.append(challenge)
        forgetOldPending(at: now())
        let body: JSONValue
        switch profile.optionsShape ?? .bare {
        case .bare, .forgeRock: body = options  // a profile cannot ask for .forgeRock (validate)
        case .publicKey: body = .object(["publicKey": options])
        case .options:
            // `{expiresAt}` in the extras: when this challenge stops being usable (Okta's member).
            let expiry = Date(timeIntervalSince1970: TimeInterval(entry.issued + pendingLifetime))
            let extras = Self.replacing("{expiresAt}", with: .string(Self.timestamp(expiry)), in: .object(profile.optionsExtras ?? [:]))
            body = .object((extras.objectValue ?? [:]).merging(["options": options]) { _, new in new })
        }
        return RelyingPartyHTTPResponse(status: 200, headers: headers, body: body)
    }

    static let cookieName = "hybrid-sim-session"

    /// `value` with every string that is exactly `placeholder` replaced (other text in braces, which
    /// a profile's extras may hold, stays as it is).
    static func replacing(_ placeholder: String, with replacement: JSONValue, in value: JSONValue) -> JSONValue {
        switch value {
        case .string(let text) where text == placeholder: return replacement
        case .array(let array): return .array(array.map { replacing(placeholder, with: replacement, in: $0) })
        case .object(let object): return .object(object.mapValues { replacing(placeholder, with: replacement, in: $0) })
        default: return value
        }
    }

    /// `2026-11-26T13:05:00.000Z`, as Okta writes `expiresAt`.
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }

    /// Drops expired challenges, and the oldest past ``maximumPending``, from the front of the
    /// issue order: each options call costs a constant amount of work on average, however many
    /// are pending (filtering the whole table on every call slowed a flooded server to 4–9 ms a call).
    private func forgetOldPending(at time: UInt64) {
        while pendingStart < pendingOrder.count {
            let challenge = pendingOrder[pendingStart]
            if let entry = pending[challenge], !expired(entry, at: time), pending.count <= Self.maximumPending {
                break
            }
            if let entry = pending[challenge], expired(entry, at: time) { remember(challenge, .expired) }
            pending[challenge] = nil  // expired or over the cap; nil already when it was used
            pendingStart += 1
        }
        if pendingStart > 1024, pendingStart * 2 > pendingOrder.count {
            pendingOrder.removeFirst(pendingStart)
            pendingStart = 0
        }
    }

    /// The number of challenges pending (for tests).
    var pendingCount: Int { pending.count }

    /// Why a challenge is no longer pending.
    enum Spent: Equatable {
        /// A result was posted with it (each is verified once, accepted or not).
        case used
        /// Its ``pendingLifetime`` passed.
        case expired
    }

    /// What ``takePending(_:registration:)`` found for a posted challenge.
    enum PendingLookup: Equatable {
        /// Issued for this ceremony and now used up.
        case taken(user: PublicKeyCredentialUserEntity?, allowList: [[UInt8]], session: String?)
        /// Issued for the other ceremony; it stays pending.
        case otherCeremony
        /// Issued, and used or expired since (among the last ``spentMemory`` such).
        case spent(Spent)
        /// Never issued, dropped past ``maximumPending``, or spent too long ago to remember.
        case unknown
    }

    /// Whether `entry`'s lifetime has passed at `time` (a clock stepped back never underflows:
    /// an entry "issued in the future" is fresh).
    private func expired(_ entry: Pending, at time: UInt64) -> Bool {
        time > entry.issued && time - entry.issued > pendingLifetime
    }

    /// The session cookie value `challenge` is bound to, if it is pending and its profile uses
    /// cookies (checked before the challenge is taken, so a post without it does not spend it).
    func pendingSession(_ challenge: [UInt8]) -> String? { pending[challenge]?.session }

    private func remember(_ challenge: [UInt8], _ why: Spent) {
        spent.remember(challenge, why)
    }

    /// Removes and returns the pending ceremony for `challenge` (single use), unless expired. A
    /// challenge issued for the other ceremony is left pending: a result posted to the wrong
    /// endpoint is the client's slip, and nothing was verified against the challenge.
    func takePending(_ challenge: [UInt8], registration: Bool) -> PendingLookup {
        guard let entry = pending[challenge] else { return spent[challenge].map { .spent($0) } ?? .unknown }
        guard !expired(entry, at: now()) else {
            pending[challenge] = nil
            remember(challenge, .expired)
            return .spent(.expired)
        }
        guard entry.registration == registration else { return .otherCeremony }
        pending[challenge] = nil
        remember(challenge, .used)
        return .taken(user: entry.user, allowList: entry.allowList, session: entry.session)
    }

    var currentCredentials: [RegisteredCredential] { store.credentials }
    var currentTime: UInt64 { now() }
    func logLine(_ line: String) { log(line) }

    /// A new user handle: 16 random bytes, or for a profile whose `user.id` is a plain string, an
    /// Okta-style ASCII ID (`00u` and 17 letters or digits).
    private func newUserId() -> [UInt8] {
        guard profile.userIdEncoding == .utf8 else { return random.bytes(16) }
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        return Array("00u".utf8) + random.bytes(17).map { alphabet[Int($0) % alphabet.count] }
    }
}
