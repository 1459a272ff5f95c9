import HybridCore

/// Which way a relayed message travels through a tunnel.
///
/// The *creator* opened the tunnel (`/cable/new`: the authenticator/phone in the QR flow); the
/// *joiner* joined it (`/cable/connect`: the client/desktop in the QR flow).
public enum RelayDirection: Sendable, Hashable, CustomStringConvertible {
    /// From the side that opened the tunnel to the side that joined it (phone → desktop in the QR flow).
    case creatorToJoiner
    /// From the side that joined to the side that opened it (desktop → phone in the QR flow).
    case joinerToCreator

    /// "creator→joiner" / "joiner→creator".
    public var description: String {
        switch self {
        case .creatorToJoiner: return "creator→joiner"
        case .joinerToCreator: return "joiner→creator"
        }
    }
}

/// Limits and timeouts of a ``TunnelRelay``. Every limit has a CLI flag (`hybrid-sim relay --help`)
/// and is documented in Docs/RELAY.md.
public struct RelayConfiguration: Sendable {
    /// A tunnel is closed with 1001 (going away) this long after it was opened, whatever it is doing.
    /// Default 120 s, as the webauthn-rs tunnel server.
    public var tunnelLifetime: Duration = .seconds(120)

    /// Largest message (after reassembling fragments) either peer may send; a larger one closes the
    /// tunnel with 1009 (message too big). Default 64 KiB: webauthn-rs uses 16 KiB, Chromium accepts
    /// up to 1 MiB; 64 KiB leaves room for large attestations and long allow-lists.
    public var maxMessageSize: Int = 64 * 1024

    /// How many messages each peer may send over the tunnel's life (buffered ones included); one more
    /// closes the tunnel with 1008 (policy violation). Default 16, as webauthn-rs; a QR-flow sign-in
    /// needs about 4 phone→desktop messages (handshake, post-handshake, update, response) and about 3
    /// desktop→phone (handshake, request, shutdown).
    public var maxMessagesPerPeer: Int = 16

    /// How many payload bytes one side may send before the other side has joined (they wait in the
    /// relay's memory); one more closes the tunnel with 1008 (policy violation). Default 16 KiB: a
    /// caBLE peer sends at most its 81-byte handshake message before its peer is there (the QR
    /// flow's phone waits for the desktop's; Chromium's linked desktop writes its own as soon as
    /// it has seen the phone's advert, which may come before the phone joined), so this only
    /// bounds what a client that is not one can make the relay hold, 16 MiB at the default 1024
    /// tunnels, where ``maxMessagesPerPeer`` × ``maxMessageSize`` alone allowed 1 GiB.
    public var maxBytesBeforeJoin: Int = 16 * 1024

    /// How many tunnels may be open at once; `/cable/new` beyond that is answered 503. Default 1024.
    public var maxOpenTunnels: Int = 1024

    /// How many TCP connections may be open at once (upgraded or not). A connection beyond that is
    /// answered a fixed HTTP 503 at once, before its request is parsed, and closed. Default 4096:
    /// twice ``maxOpenTunnels`` (two peers per tunnel) plus room for handshakes in progress, and far
    /// below the usual 20,000-descriptor process limit, so a descriptor flood never stops the relay
    /// from accepting (and answering) connections.
    public var maxConnections: Int = 4096

    /// How many connections may be waiting for their WebSocket upgrade at once (accepted, request
    /// not yet complete or not yet answered 101). One more is answered a fixed HTTP 503 before its
    /// request is read. Default 1024: a real client finishes its upgrade in one round trip (this
    /// project's load generator opens 256 at a time), and slow-loris or silent connections can then
    /// take at most a quarter of ``maxConnections``, never the room of upgraded tunnels. 0 = no cap.
    public var maxPendingUpgrades: Int = 1024

    /// How many connections one source IP address may have open at once; one more is answered a
    /// fixed HTTP 429 before its request is read. Default 0 (off): on loopback every honest client,
    /// and behind a proxy every client, shares one address, so a default cap would refuse them all;
    /// turn it on where clients come from distinct addresses.
    public var maxConnectionsPerSource: Int = 0

    /// How many tunnels one source IP address may have open that nobody joined yet (`/cable/new`,
    /// and `/cable/contact`); one more such request is answered HTTP 429. Default 0 (off), for the
    /// same reason as ``maxConnectionsPerSource``. A QR or linked sign-in holds one unjoined tunnel
    /// for about a second (until the desktop or the phone joins).
    public var maxWaitingTunnelsPerSource: Int = 0

    /// Which web page origins may use the relay; by default a request whose `Origin` is a web page
    /// (`http(s)://…`, `null`) is refused with 403, while native clients (no `Origin`, or the
    /// tunnel service's own `ws(s)://` URL) are accepted. See ``RelayOriginPolicy``.
    public var originPolicy: RelayOriginPolicy = .refuseBrowsers

    /// A tunnel that relays no message for this long is closed with 1001 (going away). Pings do not
    /// count as traffic. Default 60 s (a person may take a while to approve on the phone).
    public var idleTimeout: Duration = .seconds(60)

    /// A connection that has sent nothing after this long is dropped, and one whose request has
    /// begun and not ended is answered 408; a complete request being decided (a contact request
    /// in ``contactWait``) is left to its decision. Default 10 s.
    public var upgradeTimeout: Duration = .seconds(10)

    /// After the relay sends a close frame it waits this long for the peer's close frame or EOF before
    /// dropping the TCP connection. Default 2 s.
    public var closeHandshakeTimeout: Duration = .seconds(2)

    /// The first bytes of every routing ID this relay hands out (0 to 2 bytes; default none).
    ///
    /// Several relay instances behind one proxy each get their own prefix, so the proxy can send
    /// `/cable/connect/{routing ID}/…` to the instance that owns the tunnel by looking at the path
    /// alone (Docs/RELAY.md, "Scaling out"). A connect whose routing ID lacks the prefix is 404.
    /// Setting 3 or more bytes traps (`hybrid-sim relay --routing-id-prefix` checks its input first).
    public var routingIDPrefix: [UInt8] = [] {
        didSet { precondition(routingIDPrefix.count < HybridConstants.routingIDSize, "routing ID prefix of 0 to 2 bytes") }
    }

    /// A `/cable/contact/…` request whose phone is not listening waits this long for it to connect
    /// its push channel (a phone reconnecting to a freshly started relay) before the answer is 410
    /// (contact ID never announced) or 504 (announced, but not listening). Default 3 s; keep it
    /// below the clients' connect timeout (``upgradeTimeout`` does not cut a request being decided,
    /// whatever the two lengths).
    public var contactWait: Duration = .seconds(3)

    /// A `/cable/contact` request that arrives within this long after the relay starts, for a
    /// contact ID that no phone has announced, is answered 504 (not listening) at the end of the
    /// contact wait instead of 410 (unknown): a relay that keeps contact IDs in memory only (no
    /// ``contactPersistence``, or a memory saved before a phone first listened) cannot tell, just
    /// after a restart, a phone it never knew from one that listened before the restart and is not
    /// back yet, and a 410 makes the desktop delete its link. Default 10 minutes; zero answers 410
    /// from the start (Docs/LINKING.md).
    public var contactGraceAfterStart: Duration = .seconds(600)

    /// Keeps the contact IDs phones listened on and revoked across restarts (`hybrid-sim relay
    /// --contacts FILE`): the relay starts from its ``RelayContactPersistence/initial`` memory and
    /// saves every change. `nil` (the default): in memory only, forgotten at exit.
    public var contactPersistence: RelayContactPersistence? = nil

    /// How long a change to the contact memory waits for its save, so that the changes of a burst
    /// go into one (tests lengthen it to see the save at shutdown alone).
    package var contactSaveDelay: Duration = .seconds(1)

    /// How many phones may listen on `/cable/listen/…` at once; one more is answered 503. Default 1024.
    public var maxListeners: Int = 1024

    /// How many event loops (shards) the relay runs on: 0 (the default) uses every loop of the
    /// group it is given (`MultiThreadedEventLoopGroup.singleton`: one per core), 1 runs everything
    /// on one loop. Each loop owns the tunnels whose routing IDs name it (`RelayDispatcher`).
    public var eventLoops: Int = 0

    /// Where to record every tunnel (`hybrid-sim relay --record DIR`): one `TunnelRecording` file
    /// per tunnel, written when it closes (Docs/INSPECT.md). `nil` (the default) records nothing.
    public var recordDirectory: String? = nil

    /// Observer of the traffic: called on the event loop of the tunnel's shard with every message it
    /// relays, in order for one tunnel (different tunnels may call it at the same time from different
    /// threads), after the size checks and before it is forwarded or buffered (the bytes as the
    /// recipient will get them: Noise ciphertext after the handshake). For narration, tracing and
    /// recording; it must return quickly and must not block. Default none.
    public var messageObserver: (@Sendable (RelayDirection, [UInt8]) -> Void)?

    /// Fault injection (`hybrid-sim relay --fault`): rules that drop, delay, duplicate, corrupt,
    /// reorder or truncate relayed messages or close tunnels, and their seed (Docs/FAULTS.md).
    /// Default: none.
    public var faults = RelayFaults()

    /// Test-only hook: sees (and may modify) every relayed message before it is forwarded or buffered.
    /// Lets a test flip a byte in transit to check that the protocol layer notices.
    package var faultInjector: (@Sendable (RelayDirection, inout [UInt8]) -> Void)?

    /// Test-only hook: the time source of the tunnel lifetime and idle timer (``RelayClock``).
    /// Default `.system` (the event loop's timers); a test passes `.manual` and advances it by hand.
    package var clock: RelayClock = .system

    /// The defaults described on each property.
    public init() {}
}

/// Counters of a running relay, for tests and diagnostics.
public struct RelayStatistics: Sendable, Hashable {
    /// Tunnels currently registered (opened and not yet closed).
    public var openTunnels = 0
    /// TCP connections currently open (upgraded or not).
    public var openConnections = 0
    /// Tunnels opened with `/cable/new` since start.
    public var tunnelsOpened = 0
    /// Successful `/cable/connect` joins since start.
    public var tunnelsJoined = 0
    /// Messages delivered to the other side since start (one buffered for a peer that joined later
    /// counts when it is delivered; one whose peer never came, never).
    public var messagesRelayed = 0
    /// Payload bytes of those messages.
    public var bytesRelayed = 0
    /// Messages that had to wait for the peer to join, since start (delivered or not).
    public var messagesBuffered = 0
    /// `/cable/contact` requests waiting for their linked phone to listen.
    public var waitingContacts = 0
    /// Revocations a phone sent to the revoked contact ID itself (answered 410, not counted as
    /// refused requests; Docs/LINKING.md).
    public var revocationsReceived = 0
    /// Refused requests by HTTP status (400, 404, 409, 410, 503, …).
    public var rejectedRequests: [Int: Int] = [:]
    /// Closed tunnels by the close code the relay sent to the peers.
    public var tunnelsClosed: [UInt16: Int] = [:]
    /// `--record`: recordings that could not be written (a full disk, the directory removed), each
    /// also a warning when it happened.
    public var recordingsNotWritten = 0
    /// Why the last of those could not be written (`no space left on device`).
    public var lastRecordingFailure: String?
}
