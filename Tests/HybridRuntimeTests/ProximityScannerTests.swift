import HybridCore
@testable import HybridRuntime
import Testing

@Suite("Proximity scanner")
struct ProximityScannerTests {
    private static let ours: [UInt8] = Array(repeating: 0x0A, count: 20)
    private static let foreign: [UInt8] = Array(repeating: 0x0B, count: 20)

    /// A scanner whose matcher accepts only `ours` (returning "session-1").
    private func makeScanner(minRSSI: Int8 = -70) -> ProximityScanner<String> {
        ProximityScanner<String>(minRSSI: minRSSI) { advert in advert == Self.ours ? .matched("session-1") : .notOurs }
    }

    @Test("the datagrams ignored before a match are counted when it is accepted: the phone's repeats after it, read late by a desktop that did not run, are not among them")
    func ignoredBeforeTheMatch() async throws {
        let scanner = makeScanner()
        let port = try await scanner.start().port
        let sender = try await UDPSender.make()
        try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.foreign).bytes, to: port)  // not ours
        try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.ours).bytes, to: port)  // the match
        for _ in 0..<5 { try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.ours).bytes, to: port) }  // repeats
        // The desktop reads the match only after the repeats arrived.
        #expect(await eventually { scanner.statistics.received == 7 })
        let found = try await scanner.waitForMatchCountingIgnored(timeout: .seconds(2))
        #expect(found.match == "session-1" && found.ignoredBefore == 1, "\(found.ignoredBefore)")
        #expect(scanner.statistics.replayed == 5)
        await sender.close()
        await scanner.stop()
    }

    @Test("filters by length, UUID, RSSI, matcher and replay, counting each category")
    func filterChain() async throws {
        let calls = LockedBox(0)
        let scanner = ProximityScanner<String>(minRSSI: -70) { advert in
            calls.update { $0 += 1 }
            return advert == Self.ours ? .matched("session-1") : .notOurs
        }
        let port = try await scanner.start().port
        let sender = try await UDPSender.make()
        try await sender.send(Array(repeating: 0, count: 22), to: port)  // wrong length
        try await sender.send([0x12, 0x34, 0xD3] + Self.ours, to: port)  // unknown UUID
        try await sender.send(try ProximityDatagram(rssi: -80, advert: Self.ours).bytes, to: port)  // too far
        try await sender.send(try ProximityDatagram(rssi: -71, advert: Self.ours).bytes, to: port)  // too far
        try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.foreign).bytes, to: port)  // not ours
        try await sender.send(try ProximityDatagram(serviceUUID: .google, rssi: -70, advert: Self.ours).bytes, to: port)
        let found = try await scanner.waitForMatch(timeout: .seconds(2))
        #expect(found.match == "session-1")
        #expect(found.rssi == -70)
        try await sender.send(try ProximityDatagram(rssi: -40, advert: Self.ours).bytes, to: port)  // replay
        #expect(await eventually { scanner.statistics.received == 7 })
        let statistics = scanner.statistics
        #expect(statistics.wrongLength == 1)
        #expect(statistics.unknownServiceUUID == 1)
        #expect(statistics.firstUnknownServiceUUID == 0x1234)
        #expect(statistics.unknownServiceUUIDDetail == " (first: 0x1234)")
        #expect(statistics.tooFar == 2)
        #expect(statistics.strongestTooFarRSSI == -71)
        #expect(statistics.notOurs == 1)
        #expect(statistics.matched == 1)
        #expect(statistics.replayed == 1)
        #expect(statistics.ignored == 6)
        // The matcher only sees adverts that passed the cheap checks (not the replay).
        #expect(calls.value == 2)
        await sender.close()
        await scanner.stop()
    }

    @Test("a service UUID written little-endian is named as FIDO's byte-swapped; the first unknown UUID is the one kept")
    func byteSwappedUUID() {
        var statistics = ProximityStatistics(minRSSI: -70)
        statistics.received = 2
        statistics.unknownServiceUUID = 2
        statistics.firstUnknownServiceUUID = 0xF9FF
        #expect(statistics.description == "2 datagrams received, 0 matched, 2 ignored: 2 unknown service UUID (first: 0xF9FF, FIDO's 0xFFF9 byte-swapped: it is big-endian)")
        statistics.firstUnknownServiceUUID = 0xE2FD
        #expect(statistics.unknownServiceUUIDDetail == " (first: 0xE2FD, Google's 0xFDE2 byte-swapped: it is big-endian)")
    }

    @Test("a timeout is .noNearbyAuthenticator carrying the counters")
    func timeoutCarriesCounters() async throws {
        let scanner = makeScanner()
        let port = try await scanner.start().port
        let sender = try await UDPSender.make()
        try await sender.send(try ProximityDatagram(rssi: -80, advert: Self.ours).bytes, to: port)
        try await sender.send(try ProximityDatagram(rssi: -85, advert: Self.ours).bytes, to: port)
        #expect(await eventually { scanner.statistics.received == 2 })
        let error = await expectRuntimeError(.noNearbyAuthenticator) {
            _ = try await scanner.waitForMatch(timeout: .milliseconds(150))
        }
        #expect(error?.proximityStatistics?.tooFar == 2)
        #expect(
            error?.description
                == "no nearby authenticator within 150 ms: 2 datagrams received, 0 matched, 2 ignored: "
                + "2 too far (best rssi -80 < -70)"
        )
        await sender.close()
        await scanner.stop()
    }

    /// The desktop's own matcher: an advert that authenticates under the session's key but breaks
    /// a plaintext rule is ignored (Chromium's `eid::Decrypt` gives nothing for it), counted
    /// apart with the first reason, and a valid advert after it still matches.
    @Test("an advert for this session with an invalid plaintext is ignored and counted with its reason")
    func invalidAdvertIgnored() async throws {
        let eidKey = QRSecretKeys(qrSecret: [UInt8](repeating: 0x33, count: 16)).eidKey
        let cipher = AdvertCipher(eidKey: eidKey)
        let body: [UInt8] = Array(repeating: 0x5C, count: 10) + [0x01, 0x02, 0x03]  // nonce, routing ID
        let reserved = cipher.encrypt(plaintext: [0x01] + body + [0, 0])
        let unknownDomain = cipher.encrypt(plaintext: [0x00] + body + [2, 0])
        let valid = cipher.encrypt(plaintext: [0x00] + body + [0, 0])
        let scanner = ProximityScanner<[UInt8]>(matcher: ClientDriver.Transports.advertMatcher(eidKey: eidKey))
        let port = try await scanner.start().port
        let sender = try await UDPSender.make()
        for advert in [reserved, unknownDomain, reserved] {
            try await sender.send(try ProximityDatagram(rssi: -45, advert: advert).bytes, to: port)
        }
        #expect(await eventually { scanner.statistics.received == 3 })
        let error = await expectRuntimeError(.noNearbyAuthenticator) {
            _ = try await scanner.waitForMatch(timeout: .milliseconds(50))
        }
        #expect(error?.proximityStatistics?.invalid == 3)
        #expect(
            error?.description
                == "no nearby authenticator within 50 ms: 3 datagrams received, 0 matched, 3 ignored: "
                + "3 for this session but invalid (first: reserved byte of the EID is not zero)")

        try await sender.send(try ProximityDatagram(rssi: -45, advert: valid).bytes, to: port)
        let found = try await scanner.waitForMatch(timeout: .seconds(2))
        #expect(found.match == valid)
        #expect(scanner.statistics.matched == 1 && scanner.statistics.ignored == 3)
        await sender.close()
        await scanner.stop()
    }

    @Test("stop ends a pending wait with .invalidState and is idempotent")
    func stopEndsWait() async throws {
        let scanner = makeScanner()
        try await scanner.start()
        let wait = Task { try await scanner.waitForMatch(timeout: .seconds(5)) }
        await scanner.waitIsPending()
        await scanner.stop()
        await scanner.stop()
        await expectRuntimeError(.invalidState) { _ = try await wait.value }
    }

    @Test("a scanner refuses non-loopback hosts, a second start and a port in use")
    func startErrors() async throws {
        let remote = ProximityScanner<Int>(host: "192.0.2.1") { _ in .notOurs }
        await expectRuntimeError(.invalidAddress) { try await remote.start() }
        let scanner = makeScanner()
        let endpoint = try await scanner.start()
        #expect(endpoint.port > 0)
        await expectRuntimeError(.invalidState) { try await scanner.start() }
        // A second scanner on the same port is refused instead of silently sharing it.
        let second = ProximityScanner<Int>(port: endpoint.port) { _ in .notOurs }
        await expectRuntimeError(.bindFailed) { try await second.start() }
        await scanner.stop()
    }
}
