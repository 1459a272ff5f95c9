import HybridCore

/// One kind of misbehaving client of the hostile soak (``HostileSoak``). Each attempt opens one
/// connection (two for ``neverReads``, a burst for ``sourceFlood``), misbehaves, and records what
/// the relay answered: an HTTP status, a close code, a drop (EOF or reset), or nothing until the
/// attacker gave up ("held open to the end").
package enum HostileAttack: String, CaseIterable, Sendable, Codable, Comparable {
    /// Sends a request line and then one header byte a second, never finishing the request.
    case slowloris
    /// Connects and sends nothing.
    case silentSocket = "silent-socket"
    /// Sends the start of a request line and then nothing.
    case partialRequest = "partial-request"
    /// Upgrades (`/cable/new`) and then sends 256 random bytes.
    case garbageAfterUpgrade = "garbage-after-upgrade"
    /// Upgrades and then sends an unmasked binary frame (clients must mask, RFC 6455 §5.1).
    case unmaskedFrame = "unmasked-frame"
    /// Upgrades and then announces a 1 MiB binary frame.
    case oversizeMessage = "oversize-message"
    /// Upgrades and then sends non-final 512-byte fragments, never the last one.
    case endlessFragments = "endless-fragments"
    /// Opens a tunnel with both peers; the creator sends 200 pings at once and then 10 a second while it holds it.
    case pingFlood = "ping-flood"
    /// Upgrades and then sends a text frame (tunnel messages are binary).
    case textFrame = "text-frame"
    /// `/cable/connect` on random routing and tunnel IDs, as fast as the relay answers.
    case connectStorm = "connect-storm"
    /// Opens a tunnel with both peers; the joiner never reads while the creator floods 60 KiB messages.
    case neverReads = "never-reads"
    /// `/cable/new` with nobody ever joining, held; 32 source addresses share these.
    case unjoinedTunnel = "unjoined-tunnel"
    /// `/cable/new` with nobody ever joining, then 60 KiB messages that the relay would hold for
    /// the peer that never comes.
    case prejoinFlood = "prejoin-flood"
    /// Holds a phone's push channel (`/cable/listen/{random contact ID}`) that nobody ever contacts.
    case listenSquat = "listen-squat"
    /// Bursts of silent connections from one address, more than the per-source cap.
    case sourceFlood = "source-flood"

    /// Share of the attacking population (out of the sum over all attacks).
    var weight: Int {
        // Sized so that with the relay's default caps the attack holds more than 2,000 connections
        // while staying under 1,024 pending upgrades (~700) and 1,024 tunnels (~800): honest sign-ins
        // must still find room (Docs/ROBUSTNESS.md, "Hostile-client soak").
        switch self {
        case .slowloris: return 6
        case .silentSocket, .partialRequest: return 3
        case .pingFlood, .neverReads: return 6
        case .unjoinedTunnel: return 5
        case .listenSquat: return 8
        case .connectStorm: return 2
        case .garbageAfterUpgrade, .unmaskedFrame, .oversizeMessage, .endlessFragments, .textFrame, .prejoinFlood: return 2
        case .sourceFlood: return 0  // a fixed number of workers, see HostileSoak
        }
    }

    /// Whether an attempt holds its connection until the end of its hold time.
    var holds: Bool {
        switch self {
        case .slowloris, .silentSocket, .partialRequest, .pingFlood, .neverReads, .unjoinedTunnel, .listenSquat, .sourceFlood:
            return true
        case .garbageAfterUpgrade, .unmaskedFrame, .oversizeMessage, .endlessFragments, .textFrame, .connectStorm, .prejoinFlood:
            return false
        }
    }

    package static func < (lhs: HostileAttack, rhs: HostileAttack) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// What one attack attempt needs: where the relay is, which address to attack from, until when.
struct HostileAttempt: Sendable {
    let host: String
    let port: Int
    let source: String
    /// When the attacker lets go of a held connection.
    let holdUntil: ContinuousClock.Instant
    /// Bound on each wait for an answer.
    let answerTimeout: Duration
    /// Connections a ``HostileAttack/sourceFlood`` burst opens at once.
    let burst: Int
    let tally: HostileTally
    let attack: HostileAttack

    private var holdLeft: Duration { max(holdUntil - .now, .zero) }

    /// Runs one attempt of `attack` and records its outcomes.
    func run() async {
        switch attack {
        case .slowloris: await withConnection(slowloris)
        case .silentSocket: await withConnection { connection in await hold(connection, upgraded: false) }
        case .partialRequest:
            await withConnection { connection in
                await connection.write(Array("GET /cable/ne".utf8))
                return await hold(connection, upgraded: false)
            }
        case .garbageAfterUpgrade: await afterUpgrade { HostileWire.randomBytes(256) }
        case .unmaskedFrame: await afterUpgrade { HostileWire.frame(.binary, HostileWire.randomBytes(32), masked: false) }
        case .oversizeMessage:
            await afterUpgrade { HostileWire.frame(.binary, HostileWire.randomBytes(4096), declaredLength: 1 << 20) }
        case .textFrame: await afterUpgrade { HostileWire.frame(.text, Array("hello".utf8)) }
        case .endlessFragments: await withConnection(endlessFragments)
        case .pingFlood: await withTunnel(joinerReads: true) { creator, _ in await pingFlood(creator) }
        case .listenSquat:
            await withConnection { connection in
                // A made-up phone with a valid token: the relay's listener cap is what it squats on.
                let token = ListenToken()
                let (bytes, end) = await upgrade(
                    connection, path: TunnelServicePath.listenPath(contactID: token.contactID),
                    extra: ["\(PushChannel.listenTokenHeader): \(token.base64URL)"])
                guard HostileWire.status(bytes) == 101 else { return Self.outcome(bytes, end, upgraded: false) }
                return await hold(connection, upgraded: true)
            }
        case .connectStorm:
            await withConnection { connection in
                let (bytes, end) = await upgrade(connection, path: HostileWire.randomConnectPath())
                return Self.outcome(bytes, end, upgraded: false)
            }
        case .unjoinedTunnel:
            await withConnection { connection in
                let (bytes, end) = await upgrade(connection, path: HostileWire.randomNewPath())
                guard HostileWire.status(bytes) == 101 else { return Self.outcome(bytes, end, upgraded: false) }
                return await hold(connection, upgraded: true)
            }
        case .prejoinFlood:
            await withConnection { connection in
                let (bytes, end) = await upgrade(connection, path: HostileWire.randomNewPath())
                guard HostileWire.status(bytes) == 101 else { return Self.outcome(bytes, end, upgraded: false) }
                return await hold(connection, upgraded: true, flooding: connection)
            }
        case .neverReads:
            await withTunnel(joinerReads: false) { creator, _ in await hold(creator, upgraded: true, flooding: creator) }
        case .sourceFlood:
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<burst {
                    group.addTask { await withConnection { connection in await hold(connection, upgraded: false) } }
                }
            }
        }
    }

    // MARK: - Scripts

    private func slowloris(_ connection: HostileConnection) async -> String {
        await connection.write(Array("GET \(HostileWire.randomNewPath()) HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8))
        let dribble = Array("X-Slow-Loris: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 4096)
        var next = 0
        while holdLeft > .zero {
            let (bytes, end) = await connection.wait(timeout: min(.seconds(1), holdLeft)) { !$0.isEmpty }
            if end != nil || !bytes.isEmpty { return Self.outcome(bytes, end, upgraded: false) }
            await connection.write([dribble[next % dribble.count]])
            next += 1
        }
        return Self.heldToTheEnd
    }

    private func afterUpgrade(_ payload: @Sendable () -> [UInt8]) async {
        await withConnection { connection in
            let (bytes, end) = await upgrade(connection, path: HostileWire.randomNewPath())
            guard HostileWire.status(bytes) == 101 else { return Self.outcome(bytes, end, upgraded: false) }
            await connection.write(payload())
            let (after, finalEnd) = await connection.wait(timeout: answerTimeout) { HostileWire.closeCode($0) != nil }
            return Self.outcome(after, finalEnd, upgraded: true)
        }
    }

    private func endlessFragments(_ connection: HostileConnection) async -> String {
        let (bytes, end) = await upgrade(connection, path: HostileWire.randomNewPath())
        guard HostileWire.status(bytes) == 101 else { return Self.outcome(bytes, end, upgraded: false) }
        var sent = 0
        while holdLeft > .zero {
            let opcode: HostileWire.Opcode = sent == 0 ? .binary : .continuation
            guard await connection.write(HostileWire.frame(opcode, HostileWire.randomBytes(512), fin: false)) else { break }
            sent += 1
            let (after, finalEnd) = await connection.wait(timeout: .milliseconds(5)) { HostileWire.closeCode($0) != nil }
            if finalEnd != nil || HostileWire.closeCode(after) != nil {
                tally.count(attack, "fragments sent", sent)
                return Self.outcome(after, finalEnd, upgraded: true)
            }
        }
        tally.count(attack, "fragments sent", sent)
        return Self.heldToTheEnd
    }

    private func pingFlood(_ connection: HostileConnection) async -> String {
        var pings = 0
        for _ in 0..<200 where connection.writeIfWritable(HostileWire.frame(.ping, [1, 2, 3, 4])) { pings += 1 }
        var result: (bytes: [UInt8], end: HostileConnection.End?) = ([], nil)
        var outcome = Self.heldToTheEnd
        while holdLeft > .zero {
            result = await connection.wait(timeout: min(.milliseconds(100), holdLeft)) { HostileWire.closeCode($0) != nil }
            if result.end != nil || HostileWire.closeCode(result.bytes) != nil {
                outcome = Self.outcome(result.bytes, result.end, upgraded: true)
                break
            }
            if connection.writeIfWritable(HostileWire.frame(.ping, [5, 6, 7, 8])) { pings += 1 }
        }
        tally.count(attack, "pings sent", pings)
        tally.count(attack, "pongs received", HostileWire.pongCount(result.bytes))
        return outcome
    }

    /// Opens a tunnel from ``source`` with both peers (creator `/cable/new`, joiner
    /// `/cable/connect`), runs `body` with them and records the creator's outcome as what `body`
    /// returns (the tunnel's), the joiner's as held; a joiner that does not read never reads.
    private func withTunnel(
        joinerReads: Bool, _ body: (_ creator: HostileConnection, _ joiner: HostileConnection) async -> String
    ) async {
        let tunnelID = HostileWire.randomBytes(HybridConstants.tunnelIDSize)
        await withConnection { creator in
            let (bytes, end) = await upgrade(creator, path: TunnelServicePath.new(tunnelID: tunnelID).path)
            guard HostileWire.status(bytes) == 101, let routingID = HostileWire.routingID(bytes) else {
                return Self.outcome(bytes, end, upgraded: false)
            }
            var outcome = "joiner refused"
            await withConnection { joiner in
                let path = TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path
                let (joined, joinEnd) = await upgrade(joiner, path: path)
                guard HostileWire.status(joined) == 101 else { return Self.outcome(joined, joinEnd, upgraded: false) }
                if !joinerReads { await joiner.setReading(false) }
                outcome = await body(creator, joiner)
                return joinerReads ? Self.joinerHeld : Self.joinerNeverRead
            }
            return outcome
        }
    }

    // MARK: - Steps

    /// Opens a connection from ``source``, runs `body` and records its outcome; always closes.
    private func withConnection(_ body: (HostileConnection) async -> String) async {
        let connection: HostileConnection
        do {
            connection = try await HostileConnection.open(host: host, port: port, source: source, timeout: answerTimeout)
        } catch {
            tally.record(attack, error.label)
            return
        }
        tally.opened()
        let start = ContinuousClock.now
        let outcome = await body(connection)
        await connection.close()
        tally.closed()
        tally.record(attack, outcome, dropAfter: outcome.hasPrefix("dropped") ? ContinuousClock.now - start : nil)
    }

    /// Sends an upgrade request and waits for the response head.
    private func upgrade(
        _ connection: HostileConnection, path: String, extra: [String] = []
    ) async -> (bytes: [UInt8], end: HostileConnection.End?) {
        await connection.write(HostileWire.upgradeRequest(path: path, extra: extra))
        return await connection.wait(timeout: answerTimeout) { HostileWire.headEnd($0) != nil }
    }

    /// Holds the connection until the hold time ends or the relay acts; with `flooding`, writes 60 KiB
    /// binary messages on that connection meanwhile (within the per-peer message limit).
    @discardableResult
    private func hold(_ connection: HostileConnection, upgraded: Bool, flooding: HostileConnection? = nil) async -> String {
        var sent = 0
        while holdLeft > .zero {
            if let flooding, sent < 12, flooding.writeIfWritable(HostileWire.frame(.binary, Array(repeating: 0x5A, count: 60 * 1024))) {
                sent += 1
                tally.count(attack, "60 KiB messages sent", 1)
            }
            let (bytes, end) = await connection.wait(timeout: min(.milliseconds(flooding == nil ? 1000 : 100), holdLeft)) {
                !upgraded ? !$0.isEmpty : HostileWire.closeCode($0) != nil
            }
            if end != nil || (!upgraded && !bytes.isEmpty) || (upgraded && HostileWire.closeCode(bytes) != nil) {
                return Self.outcome(bytes, end, upgraded: upgraded)
            }
        }
        return Self.heldToTheEnd
    }

    static let heldToTheEnd = "held open to the end"
    static let joinerNeverRead = "joiner: held, never read"
    static let joinerHeld = "joiner: held"

    /// A short label for how a connection ended: the close code of an upgraded one, the HTTP status
    /// of a refused one, or how it was dropped.
    static func outcome(_ bytes: [UInt8], _ end: HostileConnection.End?, upgraded: Bool) -> String {
        if upgraded, let code = HostileWire.closeCode(bytes) { return "close \(code)" }
        if let status = HostileWire.status(bytes), !upgraded || status != 101 { return "HTTP \(status)" }
        switch end {
        case .eof?: return bytes.isEmpty || upgraded ? "dropped (EOF)" : "dropped (EOF, partial answer)"
        case .reset?: return "dropped (reset)"
        case nil: return upgraded ? "no close frame in time" : "no answer in time"
        }
    }
}
