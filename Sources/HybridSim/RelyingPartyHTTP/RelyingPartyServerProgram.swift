import Foundation
import HybridCore

/// `hybrid-sim rp`: a relying party serving one profile's endpoints on loopback, for demos and
/// tests of `hybrid-sim desktop --rp-url`.
public enum RelyingPartyServerProgram {
    /// Everything `hybrid-sim rp` can be told.
    public struct Configuration: Sendable {
        /// A built-in profile name or a profile file.
        public var profile: String
        /// TCP port; 0 picks a free one.
        public var port: Int = defaultPort
        /// The RP ID. Default example.com.
        public var rpId: String = ProgramDefaults.rpId
        /// The origin results must come from; `nil`: `https://<rp id>`.
        public var origin: String?
        /// The credential store; `nil`: `$HYBRID_SIM_HOME/rp-server-credentials.json`.
        public var storePath: String?
        /// `--attestation-roots FILE`: PEM roots a packed full attestation (`x5c`) must chain to;
        /// `nil` accepts a verified chain without establishing trust.
        public var attestationRootsPath: String?
        /// The environment (for `HYBRID_SIM_HOME`).
        public var environment: [String: String] = ProcessInfo.processInfo.environment

        /// A configuration for `profile`.
        public init(profile: String) { self.profile = profile }
    }

    /// The default port of `hybrid-sim rp`.
    public static let defaultPort = 47003

    /// Checks the port, the RP ID and the origin (normalized as a browser serializes it, and the
    /// RP ID's host or a subdomain of it); returns the origin results must carry.
    /// - Throws: ``ProgramFailure`` `badInput`; `hybrid-sim rp` reports these as usage errors (64).
    public static func checked(_ configuration: Configuration) throws(ProgramFailure) -> String {
        guard (0...65535).contains(configuration.port) else { throw ProgramFailure(.badInput, "--port must be 0…65535") }
        guard WebOrigin.isPlausibleHost(configuration.rpId) else {
            throw ProgramFailure(.badInput, "--rp-id \(configuration.rpId) is not a host name such as example.com")
        }
        // A server whose RP ID no browser's origin can match could never verify anything.
        if let problem = WebOrigin.rpIdFormProblem(configuration.rpId) { throw ProgramFailure(.badInput, "--rp-id: " + problem) }
        // As the desktop refuses such an origin: no browser would ever send a request for it.
        if DesktopCeremony.isIPAddress(configuration.rpId) {
            throw ProgramFailure(
                .badInput,
                "--rp-id \(configuration.rpId) is an IP address, and a browser makes no WebAuthn request from a page whose host is one "
                    + "(its effective domain is not a valid domain: a SecurityError), so this server could verify nothing; use localhost")
        }
        let origin: String
        if let given = configuration.origin {
            guard let normalized = WebOrigin.normalized(given) else {
                throw ProgramFailure(.badInput, "--origin \(given) is not a web origin such as https://example.com (scheme and host, no path or query)")
            }
            origin = normalized
            if let problem = WebOrigin.trailingDotProblem(origin) { throw ProgramFailure(.badInput, problem) }
            // A browser refuses an RP ID that is not the origin's host or a parent domain of it, so
            // such a server could never verify anything.
            guard let host = WebOrigin.host(of: origin),
                host == configuration.rpId || host.hasSuffix("." + configuration.rpId)
            else {
                throw ProgramFailure(
                    .badInput,
                    "--origin \(given) does not go with --rp-id \(configuration.rpId): the RP ID must be the origin's host or a parent domain of it")
            }
        } else {
            origin = "https://\(configuration.rpId)"
        }
        return origin
    }

    /// Loads the profile and store and starts listening on 127.0.0.1.
    ///
    /// - Parameters:
    ///   - configuration: the profile, relying party, store and port.
    ///   - log: one line per verdict, and per refused request within a budget.
    /// - Throws: ``ProgramFailure`` `badInput` (profile, store, settings) or `network` (port).
    public static func start(
        _ configuration: Configuration, log: @escaping @Sendable (String) -> Void
    ) async throws(ProgramFailure) -> (RelyingPartyHTTPServer, RelyingPartyService) {
        let profile = try RelyingPartyProfile.load(configuration.profile)
        let origin = try checked(configuration)
        let anchors = try configuration.attestationRootsPath.map { (path) throws(ProgramFailure) in
            try AttestationRootsFile.load(path)
        }
        let storePath =
            configuration.storePath
            ?? StoreLocation.directory(environment: configuration.environment) + "/rp-server-credentials.json"
        let store: RelyingPartyStore
        do {
            store = try RelyingPartyStore.load(path: storePath)
        } catch {
            throw ProgramFailure(error.failureKind, "cannot use the store: \(error)\(error.advice)")
        }
        let service = RelyingPartyService(
            profile: profile, relyingParty: RelyingParty(id: configuration.rpId, origin: origin, attestationTrustAnchors: anchors),
            store: store, log: log)
        // Fewer connections than the open-file limit holds: past the cap a client gets a fast 503;
        // past the limit `accept` fails and it would wait for its timeout.
        let limit = DescriptorLimit.raiseToHard()
        let cap = DescriptorLimit.cap(RelyingPartyHTTPServer.maximumConnections, under: limit)
        if cap < RelyingPartyHTTPServer.maximumConnections, let limit {
            log("note: the open-file limit (ulimit -n) is \(limit): at most \(cap) connection(s) at once, more get a 503")
        }
        let server = try await RelyingPartyHTTPServer.start(
            service: service, port: configuration.port, maximumConnections: cap, acceptLog: log)
        return (server, service)
    }
}
