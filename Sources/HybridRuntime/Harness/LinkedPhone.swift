import CTAP2
import Crypto
import Foundation
import HybridCore
import Logging
import Synchronization

/// A ``SimulatedPhone`` that can be linked: a root secret, an identity key and a listen token (its
/// hash is the contact ID), the
/// pairing IDs it handed out, and the client nonces it already answered. For ``HybridHarness``'s
/// linked transactions and for tests of the linked flow.
public final class LinkedPhone: Sendable {
    /// Why the phone will not answer a push.
    public enum Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// The client payload is not `{1: pairing ID, 2: nonce, 3: "ga"|"mc"}`.
        case malformedClientPayload
        /// The pairing ID was never handed out for the current contact ID.
        case unknownPairingID
        /// This client nonce was answered before.
        case replayedClientPayload

        /// The reason sent to the relay (and shown to the desktop).
        public var description: String {
            switch self {
            case .malformedClientPayload: return "malformed client payload"
            case .unknownPairingID: return "unknown pairing ID"
            case .replayedClientPayload: return "replayed client payload"
            }
        }
    }

    private struct State {
        var listenToken: ListenToken
        var pairingIDs: [[UInt8]] = []
        var revoked: [ListenToken] = []
        var seenNonces: Set<[UInt8]> = []
    }

    /// The authenticator answering requests.
    public let phone: SimulatedPhone
    /// Linking-map key 5.
    public let name: String
    private let rootSecret: [UInt8]
    private let identityKey: P256.KeyAgreement.PrivateKey
    private let random: RandomSource
    private let state: Mutex<State>

    /// A phone with a fresh identity from `random`.
    public init(phone: SimulatedPhone = SimulatedPhone(), name: String = "Simulated phone", random: RandomSource = .system) {
        self.phone = phone
        self.name = name
        self.random = random
        rootSecret = random.bytes(32)
        identityKey = random.keyAgreementKey()
        state = Mutex(State(listenToken: ListenToken(random: random)))
    }

    /// The current contact ID (the hash of ``listenToken``).
    public var contactID: [UInt8] { listenToken.contactID }
    /// The secret the phone listens with.
    public var listenToken: ListenToken { state.withLock { $0.listenToken } }
    /// Contact IDs revoked by ``unlink()``.
    public var revokedContactIDs: [[UInt8]] { revokedTokens.map(\.contactID) }
    /// The listen tokens of the revoked contact IDs (what the phone announces to the relay).
    public var revokedTokens: [ListenToken] { state.withLock { $0.revoked } }
    /// The identity public key (linking-map key 4).
    public var identityPublicKey: [UInt8] { Array(identityKey.publicKey.x963Representation) }

    /// A new pairing ID and the linking identity to send in one QR ceremony.
    public func linkingIdentityForQR() -> AuthenticatorSession.LinkingIdentity {
        let pairingID = random.bytes(HybridConstants.pairingIDSize)
        let contactID = state.withLock { state -> [UInt8] in
            state.pairingIDs.append(pairingID)
            return state.listenToken.contactID
        }
        return AuthenticatorSession.LinkingIdentity(
            identityKey: identityKey, contactID: contactID, pairingID: pairingID,
            linkSecret: LinkingInfo.pairedSecret(rootSecret: rootSecret, contactID: contactID, pairingID: pairingID),
            name: name)
    }

    /// Revokes the contact ID (every link dies) and starts a new one.
    public func unlink() {
        let fresh = ListenToken(random: random)
        state.withLock { state in
            state.revoked.append(state.listenToken)
            state.listenToken = fresh
            state.pairingIDs = []
        }
    }

    /// The session answering `push`, after the phone's checks (known pairing ID, nonce never seen).
    public func session(for push: PushMessage, eidPlaintext: [UInt8]? = nil) throws(Refusal) -> LinkedAuthenticatorSession {
        guard let payload = try? ClientPayload(cbor: push.clientPayload) else { throw .malformedClientPayload }
        let contactID = try state.withLock { state throws(Refusal) -> [UInt8] in
            guard state.pairingIDs.contains(payload.pairingID) else { throw .unknownPairingID }
            guard state.seenNonces.insert(payload.clientNonce).inserted else { throw .replayedClientPayload }
            return state.listenToken.contactID
        }
        do {
            return try LinkedAuthenticatorSession(
                payload: payload, tunnelID: push.tunnelID, routingID: push.routingID, identityKey: identityKey,
                linkSecret: LinkingInfo.pairedSecret(rootSecret: rootSecret, contactID: contactID, pairingID: payload.pairingID),
                getInfo: phone.getInfo, random: random, eidPlaintext: eidPlaintext)
        } catch {
            throw .malformedClientPayload
        }
    }

    /// Listens on the relay's push channel and answers `count` contact requests over loopback
    /// (WebSocket tunnels, UDP adverts to `proximity`). Refused pushes are reported to the relay.
    ///
    /// - Returns: the number of pushes answered (``PhoneListener/run(_:count:limit:start:logger:events:handle:)``).
    /// - Throws: what that throws: ``RuntimeError`` `.timeout` when `limit` passes first, among others.
    @discardableResult
    public func listen(
        relayURL: String, proximity: ProximityEndpoint, count: Int, limit: Duration, rssi: Int8 = ProximityDefaults.rssi,
        timeouts: SessionTimeouts = .fast, logger: Logger = Logger(label: "hybrid-sim.harness"),
        events: @escaping @Sendable (SessionEvent) -> Void = { _ in },
        refusals: @escaping @Sendable (Refusal) -> Void = { _ in }
    ) async throws -> Int {
        let qr = AuthenticatorDriver.Transports.loopback(relayURL: relayURL, proximity: proximity, rssi: rssi, logger: logger)
        let transports = LinkedAuthenticatorDriver.Transports(
            join: { path, timeout in try await WebSocketTunnel.open(url: relayURL + path, timeout: timeout, logger: logger) },
            advertise: qr.advertise)
        let configuration = PhoneListener.Configuration(relayURL: relayURL, listenToken: listenToken, revoked: revokedTokens)
        return try await PhoneListener.run(configuration, count: count, limit: limit, logger: logger) { push in
            let session: LinkedAuthenticatorSession
            do throws(Refusal) {
                session = try self.session(for: push)
            } catch {
                refusals(error)
                return .refused(error.description)
            }
            do {
                try await LinkedAuthenticatorDriver.run(session: session, transports: transports, timeouts: timeouts, events: events) {
                    request in self.phone.respond(to: request, now: UInt64(Date().timeIntervalSince1970))
                }
                return .answered
            } catch {
                return .failed("\(error)")
            }
        }
    }
}
