import HybridRuntime
import Testing

@Suite("Proximity advertiser")
struct ProximityAdvertiserTests {
    private static let advert: [UInt8] = Array(1...20)

    @Test("repeats the advert about every 100 ms until stopped; the scanner matches once, then counts replays")
    func repeatsUntilStopped() async throws {
        let scanner = ProximityScanner<Int> { advert in advert == Self.advert ? .matched(1) : .notOurs }
        let target = try await scanner.start()
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: .init(target: target))
        let start = ContinuousClock.now
        try await advertiser.start()
        let found = try await scanner.waitForMatch(timeout: .seconds(2))
        #expect(found.match == 1)
        #expect(found.rssi == ProximityDefaults.rssi)
        // Let it repeat a few times (a condition, not a fixed wait).
        #expect(await eventually { advertiser.sentCount >= 4 })
        await advertiser.stop()
        let elapsed = ContinuousClock.now - start
        let sent = advertiser.sentCount
        // One at t=0, then one per 100 ms: at most elapsed/100 ms + 1. Only an upper bound on the
        // cadence: a loaded machine can only make it send fewer, never more.
        let expected = Int(elapsed / .milliseconds(100)) + 1
        #expect(sent >= 4 && sent <= expected + 1, "sent \(sent) in \(elapsed), expected at most \(expected + 1)")
        #expect(await eventually { scanner.statistics.received == sent })
        #expect(scanner.statistics.matched == 1)
        #expect(scanner.statistics.replayed == sent - 1)
        // Stopped means stopped: nothing more is sent for 2.5 intervals. This sleep is the behaviour
        // under test (an absence over a window), not a synchronisation: `stop()` has already returned.
        try await Task.sleep(for: .milliseconds(250))
        #expect(advertiser.sentCount == sent)
        #expect(scanner.statistics.received == sent)
        #expect(!advertiser.isRunning)
        await scanner.stop()
    }

    @Test("gives up by itself after giveUpAfter")
    func givesUp() async throws {
        var configuration = ProximityAdvertiser.Configuration(target: ProximityEndpoint(host: "127.0.0.1", port: 9))
        configuration.interval = .milliseconds(20)
        configuration.giveUpAfter = .milliseconds(300)
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: configuration)
        try await advertiser.start()
        #expect(advertiser.isRunning)
        #expect(await eventually(timeout: .seconds(2)) { !advertiser.isRunning })
        #expect(advertiser.gaveUp)
        let sent = advertiser.sentCount
        #expect(sent >= 1)
        // Behaviour under test, not synchronisation: nothing more is sent over five intervals.
        try await Task.sleep(for: .milliseconds(100))
        #expect(advertiser.sentCount == sent)
        await advertiser.stop()
    }

    @Test("keeps sending when nobody listens (ICMP port unreachable is ignored)")
    func nobodyListening() async throws {
        let scanner = ProximityScanner<Int> { _ in .notOurs }
        let port = try await scanner.start().port
        await scanner.stop()  // the port is now closed
        var configuration = ProximityAdvertiser.Configuration(target: ProximityEndpoint(host: "127.0.0.1", port: port))
        configuration.interval = .milliseconds(10)
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: configuration)
        try await advertiser.start()
        #expect(await eventually { advertiser.sentCount >= 10 })
        #expect(advertiser.isRunning)
        await advertiser.stop()
    }

    @Test("a target nothing receives at (ECONNREFUSED) is reported once, with the scanner's address, and the advertiser stops")
    func unreachableTarget() async throws {
        let scanner = ProximityScanner<Int>(host: "::1") { _ in .notOurs }
        let port = try await scanner.start().port
        await scanner.stop()  // the port is now closed
        let reported = LockedBox<[RuntimeError]>([])
        var configuration = ProximityAdvertiser.Configuration(target: try ProximityEndpoint(parsing: "udp://[::1]:\(port)"))
        configuration.interval = .milliseconds(10)
        configuration.onUnreachable = { error in reported.update { $0.append(error) } }
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: configuration)
        try await advertiser.start()
        #expect(await eventually(timeout: .seconds(5)) { !advertiser.isRunning })
        let errors = reported.value
        #expect(errors.count == 1)
        #expect(advertiser.unreachable != nil)
        #expect(errors.first?.reason.contains("nothing receives proximity adverts at udp://[::1]:\(port) (connection refused)") == true)
        #expect(errors.first?.reason.contains("udp://127.0.0.1:PORT") == true)
        #expect(!advertiser.gaveUp)
        await advertiser.stop()
    }

    @Test("localhost is 127.0.0.1, where the scanner binds, whatever /etc/hosts lists first")
    func localhostIsIPv4() async throws {
        let scanner = ProximityScanner<Int> { advert in advert == Self.advert ? .matched(1) : .notOurs }
        let target = try await scanner.start()
        var configuration = ProximityAdvertiser.Configuration(target: ProximityEndpoint(host: "localhost", port: target.port))
        configuration.onUnreachable = { _ in }
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: configuration)
        try await advertiser.start()
        #expect(try await scanner.waitForMatch(timeout: .seconds(2)).match == 1)
        await advertiser.stop()
        await scanner.stop()
    }

    @Test("the advertiser sends the configured UUID and RSSI")
    func configuredFields() async throws {
        let seen = LockedBox<[UInt8]?>(nil)
        let scanner = ProximityScanner<Bool>(minRSSI: -128) { advert in
            seen.update { $0 = advert }
            return .matched(true)
        }
        var configuration = ProximityAdvertiser.Configuration(target: try await scanner.start())
        configuration.rssi = -90
        configuration.serviceUUID = .google
        let advertiser = try ProximityAdvertiser(advert: Self.advert, configuration: configuration)
        try await advertiser.start()
        let found = try await scanner.waitForMatch(timeout: .seconds(2))
        #expect(found.rssi == -90)
        #expect(seen.value == Self.advert)
        await advertiser.stop()
        await scanner.stop()
    }

    @Test("bad adverts and targets are refused")
    func refusals() async throws {
        let target = ProximityEndpoint(host: "127.0.0.1", port: 47002)
        await expectRuntimeError(.wrongAdvertLength) {
            _ = try ProximityAdvertiser(advert: [1, 2, 3], configuration: .init(target: target))
        }
        let remote = try ProximityAdvertiser(
            advert: Self.advert,
            configuration: .init(target: ProximityEndpoint(host: "192.0.2.1", port: 47002))
        )
        await expectRuntimeError(.invalidAddress) { try await remote.start() }
    }
}
