import CTAP2
import HybridCore
import HybridRuntime
import Synchronization

/// The desktop and phone drivers wired together without sockets (the public in-memory transaction,
/// `HybridHarness.transactInMemory`), recording each side's events and the paths they asked for.
struct InMemoryLab: Sendable {
    /// What one in-memory transaction produced.
    struct Run: Sendable {
        /// The desktop's outcome.
        var outcome: ClientDriver.Outcome
        /// Events in the order each side reported them.
        var desktopEvents: [SessionEvent]
        var phoneEvents: [SessionEvent]
        /// The path the phone asked to create and the one the desktop asked to join.
        var newPath: String
        var connectPath: String
    }

    /// The routing ID the pretend relay assigns.
    var routingID: [UInt8] = [0xA1, 0xB2, 0xC3]
    /// Limits for both sides.
    var timeouts: SessionTimeouts = .fast
    /// Wraps the phone's end of the tunnel.
    var wrapPhoneTunnel: @Sendable (any TunnelTransport) -> any TunnelTransport = { $0 }

    /// Runs one transaction (`HybridHarness.transactInMemoryBothSides`) to both sides' end; throws the
    /// desktop's error if it failed, else the phone's.
    func transact(request: [UInt8], hint: QRPayload.RequestType, phone: SimulatedPhone) async throws -> Run {
        let paths = Mutex((new: "", connect: ""))
        let desktopEvents = Mutex<[SessionEvent]>([])
        let phoneEvents = Mutex<[SessionEvent]>([])
        var relay = HybridHarness.InMemoryRelay()
        relay.routingID = routingID
        relay.wrapPhone = wrapPhoneTunnel
        relay.created = { path in paths.withLock { $0.new = path } }
        relay.joined = { path in paths.withLock { $0.connect = path } }
        let results = try await HybridHarness.transactInMemoryBothSides(
            request: request, hint: hint, phone: phone, timeouts: timeouts,
            phoneEvents: { event in phoneEvents.withLock { $0.append(event) } },
            desktopEvents: { event in desktopEvents.withLock { $0.append(event) } },
            relay: relay)
        let outcome = try results.desktop.get()
        try results.phone.get()
        let (newPath, connectPath) = paths.withLock { ($0.new, $0.connect) }
        return Run(
            outcome: outcome, desktopEvents: desktopEvents.withLock { $0 }, phoneEvents: phoneEvents.withLock { $0 },
            newPath: newPath, connectPath: connectPath)
    }
}

/// The in-memory advertiser: stopping it ends the advert stream.
struct StreamAdvertisement: AuthenticatorDriver.Advertisement {
    let sink: AsyncStream<[UInt8]>.Continuation

    func stop() async {
        sink.finish()
    }
}

/// The next element of `stream`, or `RuntimeError.timeout` after `timeout`. Only one caller may
/// wait at a time (an `AsyncStream` allows one iterator in use).
func nextElement(of stream: AsyncStream<[UInt8]>, timeout: Duration) async throws -> [UInt8] {
    try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
        group.addTask {
            var iterator = stream.makeAsyncIterator()
            guard let element = await iterator.next() else {
                throw RuntimeError(.noNearbyAuthenticator, "the in-memory advert stream ended")
            }
            return element
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let element = first else {
            throw RuntimeError.timeout("waiting for an in-memory advert", after: timeout)
        }
        return element
    }
}

/// The case name of an event, for comparing sequences without their values.
func eventName(_ event: SessionEvent) -> String {
    switch event {
    case .waitingForAdvert: return "waitingForAdvert"
    case .advertAccepted: return "advertAccepted"
    case .tunnelJoined: return "tunnelJoined"
    case .handshakeSent: return "handshakeSent"
    case .authenticatorReady: return "authenticatorReady"
    case .linkingReceived: return "linkingReceived"
    case .requestSent: return "requestSent"
    case .responseReceived: return "responseReceived"
    case .shutdownSent: return "shutdownSent"
    case .tunnelCreated: return "tunnelCreated"
    case .advertising: return "advertising"
    case .handshakeAnswered: return "handshakeAnswered"
    case .requestReceived: return "requestReceived"
    case .responseSent: return "responseSent"
    case .shutdownReceived: return "shutdownReceived"
    case .closedAfterResponse: return "closedAfterResponse"
    }
}
