import CTAP2
import HybridCore
import Synchronization

/// An in-process phone for protocol tests: a `SoftwareAuthenticator` holding its passkeys in
/// memory, answering requests under a `SoftwareAuthenticator.Policy`.
public final class SimulatedPhone: Sendable {
    private let authenticator: Mutex<SoftwareAuthenticator>
    private let policyBox: Mutex<SoftwareAuthenticator.Policy>
    private let outcomeLog = Mutex<[SoftwareAuthenticator.Outcome]>([])

    /// A phone with these passkeys (none by default) and user behaviour.
    public init(passkeys: [Passkey] = [], policy: SoftwareAuthenticator.Policy = .init(), random: RandomSource = .system) {
        authenticator = Mutex(SoftwareAuthenticator(passkeys: passkeys, random: random))
        policyBox = Mutex(policy)
    }

    /// The passkeys the phone holds now.
    public var passkeys: [Passkey] { authenticator.withLock { $0.passkeys } }

    /// How the simulated user behaves from now on.
    public var policy: SoftwareAuthenticator.Policy {
        get { policyBox.withLock { $0 } }
        set { policyBox.withLock { $0 = newValue } }
    }

    /// What each answered request did, oldest first.
    public var outcomes: [SoftwareAuthenticator.Outcome] { outcomeLog.withLock { $0 } }

    /// The getInfo response CBOR for the post-handshake message, its AAGUID the one the current
    /// ``policy``'s credentials carry (`SoftwareAuthenticator.getInfo(for:)`).
    public var getInfo: [UInt8] { CBOR.encode(SoftwareAuthenticator.getInfo(for: policy).cbor) }

    /// Answers one CTAP2 request.
    public func respond(to request: [UInt8], now: UInt64) -> [UInt8] {
        let policy = self.policy
        let (response, outcome) = authenticator.withLock { $0.handle(request, policy: policy, now: now) }
        outcomeLog.withLock { $0.append(outcome) }
        return response
    }
}

/// What the harness needs from the phone's authenticator: its getInfo and an answer to each CTAP2
/// request. ``SimulatedPhone`` is one; conform your own authenticator logic to run it through
/// ``HybridHarness/register(on:relyingParty:userName:userID:options:)``,
/// ``HybridHarness/signIn(on:relyingParty:knownCredentials:allowCredentials:options:)``,
/// ``HybridHarness/transact(request:hint:phone:options:linking:)`` and their in-memory forms,
/// with HybridSim's desktop, relay and relying party around it.
public protocol HarnessAuthenticator: Sendable {
    /// The authenticatorGetInfo response CBOR, which the post-handshake message carries.
    var getInfo: [UInt8] { get }
    /// Answers one CTAP2 request (command byte ‖ CBOR) with status byte ‖ CBOR; `now` is the
    /// harness's clock, seconds since the Unix epoch.
    func respond(to request: [UInt8], now: UInt64) async -> [UInt8]
}

extension SimulatedPhone: HarnessAuthenticator {}
