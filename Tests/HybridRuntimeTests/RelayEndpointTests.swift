import HybridCore
import HybridRuntime
import Testing

/// The relay's HTTP contract (Docs/RELAY.md, part of the external contract of Docs/CLI.md), tested from the outside.
@Suite("Relay endpoints and status codes")
struct RelayEndpointTests {
    @Test("/cable/new answers 101 with fido.cable and a 6 upper-hex X-caBLE-Routing-ID")
    func newTunnelHeaders() async throws {
        try await withRelay { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            try await raw.write(RawConnection.upgradeRequest(path: path))
            let head = await raw.readResponseHead()
            #expect(RawConnection.status(of: head) == 101)
            let lines = head.split(separator: "\r\n").map { $0.lowercased() }
            #expect(lines.contains("sec-websocket-protocol: fido.cable"))
            let routing = try #require(
                head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("x-cable-routing-id:") }
            )
            let value = routing.split(separator: ":", maxSplits: 1)[1].trimmingCharacters(in: .whitespaces)
            #expect(value.count == 6)
            #expect(value.allSatisfy { "0123456789ABCDEF".contains($0) })
            await raw.close()

            // The client reads the same header as 3 bytes.
            let tunnel = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            #expect(tunnel.routingID?.count == 3)
            await tunnel.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("/cable/connect of an unknown tunnel is 404")
    func connectUnknownTunnel() async throws {
        try await withRelay { relay, endpoint in
            let path = TunnelServicePath.connect(routingID: [1, 2, 3], tunnelID: randomTunnelID()).path
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(url: endpoint.url + path)
            }
            #expect(error?.httpStatus == 404)
            #expect(error?.description == "relay rejected /cable/connect: 404 Not Found (unknown tunnel or routing ID)")
            #expect(relay.statistics.rejectedRequests[404] == 1)
        }
    }

    @Test("/cable/connect with the wrong routing ID is 404")
    func connectWrongRoutingID() async throws {
        try await withRelay { _, endpoint in
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path
            )
            let routingID = try #require(phone.routingID)
            let wrong = [routingID[0] ^ 0x01, routingID[1], routingID[2]]
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.connect(routingID: wrong, tunnelID: tunnelID).path
                )
            }
            #expect(error?.httpStatus == 404)
            await phone.close()
        }
    }

    @Test("a second /cable/new for an open tunnel ID is 409")
    func duplicateNew() async throws {
        try await withRelay { _, endpoint in
            let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            let phone = try await WebSocketTunnel.open(url: endpoint.url + path)
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(url: endpoint.url + path)
            }
            #expect(error?.httpStatus == 409)
            #expect(error?.description.contains("tunnel ID already open") == true)
            await phone.close()
        }
    }

    @Test("a second joiner is 409")
    func secondJoiner() async throws {
        try await withRelay { _, endpoint in
            let ends = try await openTunnel(endpoint)
            let routingID = try #require(ends.phone.routingID)
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.connect(routingID: routingID, tunnelID: ends.tunnelID).path
                )
            }
            #expect(error?.httpStatus == 409)
            await ends.close()
        }
    }

    @Test("lower-case hex paths are accepted")
    func lowerCaseHex() async throws {
        try await withRelay { _, endpoint in
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(
                url: endpoint.url + "/cable/new/" + upperHex(tunnelID).lowercased()
            )
            let routingID = try #require(phone.routingID)
            let desktop = try await WebSocketTunnel.open(
                url: endpoint.url
                    + "/cable/connect/\(upperHex(routingID).lowercased())/\(upperHex(tunnelID).lowercased())"
            )
            try await phone.send([1, 2, 3])
            #expect(try await desktop.receive(timeout: .seconds(2)) == [1, 2, 3])
            await phone.close()
            await desktop.close()
        }
    }

    @Test("an upgrade without the fido.cable subprotocol is 400")
    func missingSubprotocol() async throws {
        try await withRelay { relay, endpoint in
            var options = WebSocketTunnel.Options()
            options.offersSubprotocol = false
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path,
                    options: options
                )
            }
            #expect(error?.httpStatus == 400)
            // Other subprotocols alone do not count either.
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(
                RawConnection.upgradeRequest(
                    path: TunnelServicePath.new(tunnelID: randomTunnelID()).path,
                    subprotocol: "chat, superchat"
                )
            )
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 400)
            #expect(await raw.waitForClose())
            #expect(relay.openTunnelCount == 0)
        }
    }

    @Test("fido.cable among several offered subprotocols is selected")
    func subprotocolInList() async throws {
        try await withRelay { _, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(
                RawConnection.upgradeRequest(
                    path: TunnelServicePath.new(tunnelID: randomTunnelID()).path,
                    subprotocol: "chat, fido.cable"
                )
            )
            let head = await raw.readResponseHead()
            #expect(RawConnection.status(of: head) == 101)
            #expect(head.lowercased().contains("sec-websocket-protocol: fido.cable"))
            await raw.close()
        }
    }

    @Test("/cable/contact for a contact ID no phone announced is 410 Gone after the contact wait")
    func contactIsGone() async throws {
        var configuration = RelayConfiguration()
        configuration.contactWait = .milliseconds(100)
        configuration.contactGraceAfterStart = .zero
        try await withRelay(configuration) { relay, endpoint in
            var options = WebSocketTunnel.Options()
            options.extraHeaders = [
                ("X-caBLE-Client-Payload", "A3014801020304050607080250202122232425262728292A2B2C2D2E2F03626761")
            ]
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.contact(contactID: Array("some contact".utf8)).path,
                    options: options
                )
            }
            #expect(error?.httpStatus == 410)
            #expect(error?.description == "relay rejected /cable/contact: 410 Gone (contact ID unknown)")
            #expect(relay.statistics.rejectedRequests[410] == 1)
        }
    }

    @Test(
        "malformed paths are 404, even as WebSocket upgrades",
        arguments: TunnelPathVectors.invalid.filter { $0.hasPrefix("/") }
    )
    func malformedPaths(path: String) async throws {
        try await withRelay { _, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write(RawConnection.upgradeRequest(path: path))
            #expect(RawConnection.status(of: await raw.readResponseHead()) == 404)
            #expect(await raw.waitForClose())
        }
    }

    @Test("requests that are not GET WebSocket upgrades are 400 (valid path) or 404 (other path); another WebSocket version is 426 naming 13")
    func plainRequests() async throws {
        try await withRelay { relay, endpoint in
            let path = TunnelServicePath.new(tunnelID: randomTunnelID()).path
            let cases: [(String, Int)] = [
                (RawConnection.upgradeRequest(path: path, method: "POST"), 400),
                (RawConnection.upgradeRequest(path: path, upgrade: false), 400),
                (RawConnection.upgradeRequest(path: "/index.html", upgrade: false), 404),
                (RawConnection.upgradeRequest(path: "/index.html", method: "PUT"), 404),
                (
                    RawConnection.upgradeRequest(path: path)
                        .replacingOccurrences(of: "Sec-WebSocket-Version: 13", with: "Sec-WebSocket-Version: 8"),
                    426
                ),
            ]
            for (request, status) in cases {
                let raw = try await RawConnection.connect(port: endpoint.port)
                try await raw.write(request)
                let head = await raw.readResponseHead()
                #expect(RawConnection.status(of: head) == status, "\(request)")
                if status == 426 {
                    // RFC 6455 §4.2.2: the version the relay speaks goes back with the refusal.
                    #expect(head.contains("\r\nSec-WebSocket-Version: 13\r\n"), "\(head)")
                }
                #expect(await raw.waitForClose())
            }
            #expect(relay.openTunnelCount == 0)
        }
    }

    @Test("beyond maxOpenTunnels /cable/new is 503")
    func tooManyTunnels() async throws {
        var configuration = RelayConfiguration()
        configuration.maxOpenTunnels = 2
        try await withRelay(configuration) { relay, endpoint in
            let first = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            let second = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            let error = await expectRuntimeError(.upgradeRejected) {
                _ = try await WebSocketTunnel.open(
                    url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
                )
            }
            #expect(error?.httpStatus == 503)
            #expect(relay.openTunnelCount == 2)
            // Closing one frees a slot.
            await first.close()
            #expect(await eventually { relay.openTunnelCount == 1 })
            let third = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.new(tunnelID: randomTunnelID()).path
            )
            await second.close()
            await third.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }

    @Test("a connection that never completes its request is dropped after the upgrade timeout")
    func upgradeTimeout() async throws {
        var configuration = RelayConfiguration()
        configuration.upgradeTimeout = .milliseconds(200)
        try await withRelay(configuration) { relay, endpoint in
            let raw = try await RawConnection.connect(port: endpoint.port)
            try await raw.write("GET /cable/new/")  // and nothing more
            let start = ContinuousClock.now
            #expect(await raw.waitForClose(timeout: .seconds(3)))
            #expect(ContinuousClock.now - start < .seconds(3))
            #expect(await eventually { relay.statistics.openConnections == 0 })
        }
    }

    @Test("every connection gets the whole upgrade timeout from its own start; a connection that upgraded outlives it")
    func upgradeTimeoutPerConnection() async throws {
        var configuration = RelayConfiguration()
        configuration.upgradeTimeout = .milliseconds(300)
        try await withRelay(configuration) { relay, endpoint in
            let tunnelID = randomTunnelID()
            let phone = try await WebSocketTunnel.open(url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path)
            let routingID = try #require(phone.routingID)
            let desktop = try await WebSocketTunnel.open(
                url: endpoint.url + TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path)
            let opened = ContinuousClock.now
            try await Task.sleep(for: .milliseconds(150))
            let lateStart = ContinuousClock.now
            let late = try await RawConnection.connect(port: endpoint.port)
            // Routable (a relay with several shards hands it to one), then nothing more: the
            // shard's upgrade timeout, not the dispatcher's, drops it.
            try await late.write("GET /cable/new/68656C")
            // Past the upgraded connections' deadline (and one granularity): they still relay.
            try await Task.sleep(until: opened + .milliseconds(400))
            try await desktop.send([1, 2, 3])
            #expect(try await phone.receive(timeout: .seconds(3)) == [1, 2, 3])
            // Dropped at its own deadline, which began when it connected (not before: the relay
            // cannot have started its clock before `lateStart`).
            #expect(await late.waitForClose(timeout: .seconds(3)), "the late connection is dropped at its own deadline")
            #expect(ContinuousClock.now - lateStart >= .milliseconds(300), "closed before its own timeout")
            #expect(relay.openTunnelCount == 1)
            await desktop.close()
            await phone.close()
            #expect(await eventually { relay.openTunnelCount == 0 })
        }
    }
}

/// `RelayConfiguration.routingIDPrefix` (`hybrid-sim relay --routing-id-prefix`): what a proxy
/// in front of several instances routes `/cable/connect` by.
@Suite("Relay: routing-ID prefix")
struct RelayRoutingPrefixTests {
    @Test("every routing ID starts with the prefix; a connect under another prefix is 404, under the right one joins")
    func prefix() async throws {
        for prefix in [[0x7E], [0x01, 0xFF]] as [[UInt8]] {
            var configuration = RelayConfiguration()
            configuration.routingIDPrefix = prefix
            try await withRelay(configuration) { _, endpoint in
                for _ in 0..<8 {
                    let tunnelID = randomTunnelID()
                    let phone = try await WebSocketTunnel.open(
                        url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path, timeout: .seconds(5))
                    let routing = try #require(phone.routingID)
                    #expect(Array(routing.prefix(prefix.count)) == prefix, "routing ID \(routing)")
                    var foreign = routing
                    foreign[0] ^= 0x80  // another instance's prefix
                    let misrouted = await expectRuntimeError(.upgradeRejected) {
                        _ = try await WebSocketTunnel.open(
                            url: endpoint.url + TunnelServicePath.connect(routingID: foreign, tunnelID: tunnelID).path,
                            timeout: .seconds(5))
                    }
                    #expect(misrouted?.httpStatus == 404)
                    let desktop = try await WebSocketTunnel.open(
                        url: endpoint.url + TunnelServicePath.connect(routingID: routing, tunnelID: tunnelID).path,
                        timeout: .seconds(5))
                    await desktop.close()
                    await phone.close()
                }
            }
        }
    }
}
