import AsyncHTTPClient
import Foundation
import HybridRuntime
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Talks to a relying party's HTTP API as a profile describes (`hybrid-sim desktop --rp-url`):
/// fetches the options, later posts the result and reads the verdict. https URLs use TLS with the
/// system's trust roots (AsyncHTTPClient), or those `RelyingPartyTLS` adds (`--rp-ca`) or
/// replaces them with (`SSL_CERT_FILE`). Cookies the server sets are sent back within the run.
public final class RelyingPartyClient: Sendable {
    /// The relying party's answer to the result.
    public struct Verdict: Sendable, Hashable {
        /// Whether the profile's success rule holds.
        public var accepted: Bool
        /// The HTTP status.
        public var status: Int
        /// The body, as text (shortened for messages).
        public var body: String
        /// Why the answer was not a success when it does not say so itself: a status the rule allows
        /// without the member it names being `true`, or a status below 400 the rule does not list
        /// (a 201 where it wants 200); `nil` otherwise.
        public var why: String? = nil
    }

    /// The query of `--rp-url` (without `?`), added to every endpoint's URL after the profile's path.
    public let baseQuery: String?
    /// The base URL, without a trailing slash (nor its query).
    public let baseURL: String
    /// The profile followed.
    public let profile: RelyingPartyProfile
    private let headers: [(String, String)]
    private let timeout: Duration
    private let connectTimeout: Duration
    private let tls: TLSConfiguration?
    /// The cookies the relying party set, kept as a browser keeps them (``CookieJar``); a profile
    /// with `"cookies": false` keeps none.
    private let cookies = Mutex(CookieJar())

    /// Prepares a client: checks the URL and resolves the profile's `${VARIABLE}` headers.
    ///
    /// - Parameters:
    ///   - baseURL: the relying party's `http://` or `https://` URL (`--rp-url`).
    ///   - profile: which endpoints and body shapes the relying party uses.
    ///   - extraHeaders: `--rp-header` values (`Name: value`), added after (and replacing) the profile's.
    ///   - environment: where the profile's `${VARIABLE}` header values are looked up.
    ///   - timeout: the longest a whole request may take.
    ///   - connectTimeout: the longest the TCP (and TLS) connection may take (at most `timeout`).
    ///   - tls: the TLS configuration for https (`RelyingPartyTLS.configuration(caFile:environment:)`);
    ///     `nil`: AsyncHTTPClient's default, the system's trust roots.
    /// - Throws: ``ProgramFailure`` `badInput` for a URL that is not http(s) or a missing variable.
    public init(
        baseURL: String, profile: RelyingPartyProfile, extraHeaders: [String] = [],
        environment: [String: String], timeout: Duration = .seconds(30), connectTimeout: Duration = .seconds(5),
        tls: TLSConfiguration? = nil
    ) throws(ProgramFailure) {
        self.tls = tls
        guard let components = URLComponents(string: baseURL), let scheme = components.scheme,
            ["http", "https"].contains(scheme), components.host?.isEmpty == false
        else {
            throw ProgramFailure(.badInput, "--rp-url \(baseURL) is not an http:// or https:// URL")
        }
        if let problem = Self.problem(with: components) {
            throw ProgramFailure(.badInput, "--rp-url \(Self.redacted(components)) \(problem)")
        }
        // The profile's paths go after the URL's path, its query after them (a tenant's `?t=x`).
        var base = components
        base.percentEncodedQuery = nil
        let text = base.string ?? baseURL
        self.baseURL = text.hasSuffix("/") ? String(text.dropLast()) : text
        self.baseQuery = components.percentEncodedQuery.flatMap { $0.isEmpty ? nil : $0 }
        self.profile = profile
        self.timeout = timeout
        // Never longer than the whole request: a relying party that cannot be reached within
        // `timeout` is then told as one that could not be connected to, not as one that was silent.
        self.connectTimeout = min(connectTimeout, timeout)
        var given: [(String, String)] = []
        for line in extraHeaders {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex else {
                throw ProgramFailure(.badInput, "--rp-header \(line) is not of the form 'Name: value'")
            }
            let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
            let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            try Self.checkHeader(name: name, value: value, source: "--rp-header")
            given.append((name, value))
        }
        let overridden = Set(given.map { $0.0.lowercased() })
        var resolved: [(String, String)] = []
        for (name, value) in (profile.headers ?? [:]).sorted(by: { $0.key < $1.key })
        where !overridden.contains(name.lowercased()) {
            let expanded = try Self.expand(value, header: name, profile: profile.name, environment: environment)
            try Self.checkHeader(name: name, value: expanded, source: "the \(profile.name) profile's header")
            resolved.append((name, expanded))
        }
        self.headers = resolved + given
    }

    /// A header the request could not carry is bad input, found before any connection: a name that
    /// is not an RFC 9110 token, or a value with a control character (a CR or LF would start
    /// another header).
    private static func checkHeader(name: String, value: String, source: String) throws(ProgramFailure) {
        guard !name.isEmpty, name.utf8.allSatisfy(ResponseHead.isTokenByte) else {
            throw ProgramFailure(.badInput, "\(source) \(name): not a header name (letters, digits and !#$%&'*+-.^_`|~ only)")
        }
        guard !value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) else {
            throw ProgramFailure(.badInput, "\(source) \(name): the value holds a control character (a line break would start another header)")
        }
    }

    /// Fetches the options document for a ceremony.
    ///
    /// - Throws: ``ProgramFailure`` `network` when the server cannot be reached, `failed` when it
    ///   answers with an error status.
    public func fetchOptions(
        _ ceremony: RelyingPartyProfile.Ceremony, values: [String: JSONValue]
    ) async throws(ProgramFailure) -> [UInt8] {
        let (status, body, url) = try await call(ceremony.options, values: values)
        guard (200..<300).contains(status) else {
            throw ProgramFailure(
                .failed, "the relying party answered HTTP \(status) to \(ceremony.options.method) \(url): \(Self.shorten(body))")
        }
        return body
    }

    /// Posts the result and reads the verdict (a rejection is a verdict, not an error).
    ///
    /// - Throws: ``ProgramFailure`` `network` when the server cannot be reached.
    public func submit(
        _ ceremony: RelyingPartyProfile.Ceremony, values: [String: JSONValue]
    ) async throws(ProgramFailure) -> Verdict {
        let (status, body, _) = try await call(ceremony.verify, values: values)
        var accepted = ceremony.success.status.contains(status)
        var why: String?
        if !accepted, status < 400 {
            // Not an error status, so the answer alone does not say why it is no success (a 201
            // where the rule lists 200): the rule does.
            why = "the profile's success rule wants HTTP status \(Self.either(ceremony.success.status)), not \(status)"
        }
        if accepted, let member = ceremony.success.member {
            // A browser's response.json() drops a UTF-8 byte-order mark; so does this.
            let value = JSONValue.parse(JSONValue.withoutByteOrderMark(body))
            accepted = value?[member] == .bool(true)
            if !accepted {
                why = value == nil
                    ? "the profile's success rule wants a JSON body with \"\(member)\": true; this body is not JSON"
                    : "the profile's success rule wants \"\(member)\": true; the body has " + (value?[member] == nil ? "no \"\(member)\" member" : "\"\(member)\" but not true")
            }
        }
        return Verdict(accepted: accepted, status: status, body: Self.shorten(body), why: why)
    }

    /// "200", "200 or 201", "200, 201 or 204".
    static func either(_ statuses: [Int]) -> String {
        let names = statuses.map(String.init)
        guard let last = names.last, names.count > 1 else { return names.first ?? "" }
        return names.dropLast().joined(separator: ", ") + " or " + last
    }

    /// What is wrong with an `--rp-url` that is http(s) with a host, or `nil`: a fragment is never
    /// sent to a server (the profile's paths would be lost behind it), and a user name or password
    /// would be printed and logged with the URL.
    static func problem(with components: URLComponents) -> String? {
        if components.fragment != nil {
            return "has a fragment (#…), which is never sent to a server: the profile's paths would go after it, unsent; leave it out"
        }
        if components.user != nil || components.password != nil {
            return "holds a user name or password, which would be printed with the URL: give credentials with --rp-header "
                + "(Authorization: Basic …)"
        }
        return nil
    }

    /// The URL with any password replaced by `***`, for messages.
    static func redacted(_ components: URLComponents) -> String {
        guard components.password != nil else { return components.string ?? "" }
        var shown = components
        shown.password = "***"
        return shown.string ?? ""
    }

    /// The URL an endpoint is called at, with placeholders filled in.
    public func url(_ endpoint: RelyingPartyProfile.Endpoint, values: [String: JSONValue]) throws(ProgramFailure) -> String {
        do {
            let path = try JSONValue.substitute(in: endpoint.path, values, forURL: true)
            guard let baseQuery else { return baseURL + path }
            return baseURL + path + (path.contains("?") ? "&" : "?") + baseQuery
        } catch {
            throw ProgramFailure(.badInput, "profile \(profile.name): \(endpoint.path): \(error)")
        }
    }

    private func call(
        _ endpoint: RelyingPartyProfile.Endpoint, values: [String: JSONValue]
    ) async throws(ProgramFailure) -> (Int, [UInt8], String) {
        let url = try url(endpoint, values: values)
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: endpoint.method)
        request.headers.add(name: "Accept", value: "application/json")
        for (name, value) in headers {
            request.headers.replaceOrAdd(name: name, value: value)
        }
        let target = URLComponents(string: url)
        if let target, let cookie = cookies.withLock({ $0.header(for: target) }) {
            request.headers.add(name: "Cookie", value: cookie)
        }
        if let template = endpoint.body {
            let body: JSONValue
            do {
                body = try template.substituting(values)
            } catch {
                throw ProgramFailure(.badInput, "profile \(profile.name): body of \(endpoint.path): \(error)")
            }
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: Array(body.data)))
        }
        // One client per call, which does not retry a failed connection: a relying party that is
        // not running, or a host name that does not resolve, fails at once with the system's
        // reason (the client's default retries with back-off until the connect timeout, 5 s of
        // silence for a typo). A connection that hangs still ends at `connectTimeout`, which the
        // whole request's deadline is a little behind, so that it, not the deadline, reports it.
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .nanoseconds(connectTimeout.nanoseconds), read: .nanoseconds(timeout.nanoseconds))
        configuration.connectionPool.retryConnectionEstablishment = false
        if let tls { configuration.tlsConfiguration = tls }
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let result: Result<(Int, [UInt8], String), ProgramFailure>
        let end = ContinuousClock.now + timeout + .milliseconds(100)
        do {
            let response = try await client.execute(request, timeout: .nanoseconds((end - .now).nanoseconds))
            // The client's deadline covers the answer's head; a body sent slowly enough is bounded
            // here, by the same end, or a byte every few seconds could hold the desktop for ever.
            let buffer = try await Self.collect(response.body, until: end, client: client)
            // The answer's cookies belong to the URL that answered (the last one after redirects;
            // the redirects' own Set-Cookie headers are not seen: AsyncHTTPClient follows them).
            let answeredBy = response.history.last.flatMap { URLComponents(string: $0.request.url) } ?? target
            if profile.cookies != false, let answeredBy {
                for header in response.headers[canonicalForm: "Set-Cookie"] {
                    cookies.withLock { $0.store(String(header), from: answeredBy) }
                }
            }
            // After redirects the answer is the last URL's: messages name it, not only the first.
            var answered = url
            if response.history.count > 1, let last = response.history.last?.request {
                answered = "\(url) (redirected to \(last.method.rawValue) \(last.url))"
            }
            result = .success((Int(response.status.code), Array(buffer.readableBytesView), answered))
        } catch {
            if error is BodyDeadline {
                result = .failure(ProgramFailure(.timeout, "the relying party at \(url) did not finish its answer within \(timeout.seconds)"))
            } else if let error = error as? HTTPClientError, [.deadlineExceeded, .readTimeout].contains(error) {
                // Connected, and then silent: a timeout (exit 3), as for a silent relay.
                result = .failure(ProgramFailure(.timeout, "the relying party at \(url) did not answer within \(timeout.seconds)"))
            } else if let error = error as? HTTPClientError, error == .connectTimeout {
                result = .failure(ProgramFailure(.timeout, "cannot reach the relying party at \(url): \(reason(error))"))
            } else if let answered = Self.badAnswer(error) {
                // Reached, and its answer could not be used: not a network failure.
                result = .failure(ProgramFailure(.failed, "the relying party at \(url) \(answered)"))
            } else {
                result = .failure(ProgramFailure(.network, "cannot reach the relying party at \(url): \(reason(error))"))
            }
        }
        try? await client.shutdown()
        return try result.get()
    }

    /// The whole body (at most 1 MiB), or ``BodyDeadline`` once `end` passed: the client is shut
    /// down then, which ends the transfer however slowly the server sends.
    private static func collect(
        _ body: HTTPClientResponse.Body, until end: ContinuousClock.Instant, client: HTTPClient
    ) async throws -> ByteBuffer {
        try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
            group.addTask { try await body.collect(upTo: 1 << 20) }
            group.addTask {
                try? await Task.sleep(until: end)
                return nil
            }
            let first = try await group.next() ?? nil
            if let first {
                group.cancelAll()
                return first
            }
            try? await client.shutdown()
            group.cancelAll()
            throw BodyDeadline()
        }
    }

    /// What was wrong with an answer that arrived (too large, not HTTP, cut short, a redirect
    /// loop), in words; `nil` for an error of reaching the server.
    static func badAnswer(_ error: any Error) -> String? {
        if error is NIOTooManyBytesError {
            return "answered with more than 1 MiB, the most the desktop reads"
        }
        if let error = error as? HTTPParserError {
            if error == .invalidEOFState {
                return "closed the connection in the middle of its answer"
            }
            return "sent an answer that is not HTTP (\(error))"
        }
        if let error = error as? HTTPClientError {
            switch error {
            case .redirectCycleDetected: return "redirected in a loop"
            case .redirectLimitReached: return "redirected too many times"
            default: return nil
            }
        }
        return nil
    }

    /// The answer's body did not arrive in time (``collect(_:until:client:)``).
    private struct BodyDeadline: Error {}

    /// Why a call failed, in words rather than the HTTP client's type names: the system's reason
    /// for a socket error ("connection refused"), or which limit ran out.
    private func reason(_ error: any Error) -> String {
        if let tls = RelyingPartyTLS.reason(error, host: URLComponents(string: baseURL)?.host ?? baseURL) { return tls }
        guard let error = error as? HTTPClientError else { return RuntimeError.systemReason(error) }
        switch error {
        case .deadlineExceeded, .readTimeout:
            return "no answer within \(timeout.seconds)"
        case .connectTimeout:
            return "could not connect within \(connectTimeout.seconds)"
        case .remoteConnectionClosed:
            return "the server closed the connection without answering"
        default:
            return RuntimeError.systemReason(error)
        }
    }

    /// Expands `${VARIABLE}` from the environment.
    static func expand(
        _ value: String, header: String, profile: String, environment: [String: String]
    ) throws(ProgramFailure) -> String {
        var out = ""
        var rest = Substring(value)
        while let start = rest.range(of: "${") {
            out += rest[..<start.lowerBound]
            guard let end = rest[start.upperBound...].firstIndex(of: "}") else { break }
            let name = String(rest[start.upperBound..<end])
            guard let found = environment[name], !found.isEmpty else {
                throw ProgramFailure(
                    .badInput,
                    "the \(profile) profile sends the header \(header), which needs the environment variable \(name) (or give --rp-header '\(header): …')"
                )
            }
            out += found
            rest = rest[rest.index(after: end)...]
        }
        return out + rest
    }

    /// The relying party's answer for a message line: trimmed, at most 400 characters, and with
    /// every character that could end or disguise the line escaped (`PeerText.printable`), so an
    /// error page of many lines, or a body with terminal escapes, stays one `error:` line.
    package static func shorten(_ body: [UInt8]) -> String {
        let text = String(decoding: body, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return PeerText.printable(text, limit: 400)
    }
}

extension Duration {
    /// The whole duration in nanoseconds.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
