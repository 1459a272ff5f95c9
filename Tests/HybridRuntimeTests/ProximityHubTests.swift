import HybridCore
@testable import HybridRuntime
import NIOPosix
import Testing

/// `ProximityHub`: one scan socket and one send socket shared by many transactions (a harness
/// keeps one for its lifetime instead of binding two UDP sockets per sign-in).
@Suite("Proximity hub: shared UDP sockets")
struct ProximityHubTests {
    private static let advertA: [UInt8] = Array(repeating: 0x0A, count: 20)
    private static let advertB: [UInt8] = Array(repeating: 0x0B, count: 20)

    /// A scanner on `hub` whose matcher accepts only `advert` (returning `name`).
    private func scanner(on hub: ProximityHub, accepting advert: [UInt8], as name: String) -> ProximityScanner<String> {
        ProximityScanner<String>(sharing: hub, group: MultiThreadedEventLoopGroup.singleton, logger: quietLogger) {
            $0 == advert ? .matched(name) : .notOurs
        }
    }

    @Test("scanners on one hub each match only their own advert, count the others', and hear nothing once stopped")
    func sharedScanSocket() async throws {
        let hub = try await ProximityHub.start(group: MultiThreadedEventLoopGroup.singleton)
        let a = scanner(on: hub, accepting: Self.advertA, as: "A")
        let b = scanner(on: hub, accepting: Self.advertB, as: "B")
        #expect(try await a.start() == hub.scanEndpoint)
        #expect(try await b.start() == hub.scanEndpoint)
        #expect(hub.attachedCount == 2)

        let sender = try await UDPSender.make()
        let port = hub.scanEndpoint.port
        try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.advertA).bytes, to: port)
        try await sender.send(try ProximityDatagram(rssi: -50, advert: Self.advertB).bytes, to: port)
        let foundA = try await a.waitForMatch(timeout: .seconds(2))
        let foundB = try await b.waitForMatch(timeout: .seconds(2))
        #expect(foundA.match == "A" && foundA.rssi == -45)
        #expect(foundB.match == "B" && foundB.rssi == -50)
        #expect(await eventually { a.statistics.received == 2 && b.statistics.received == 2 })
        #expect(a.statistics.matched == 1 && a.statistics.notOurs == 1)
        #expect(b.statistics.matched == 1 && b.statistics.notOurs == 1)

        // A stops: it is detached, B still hears everything.
        await a.stop()
        #expect(hub.attachedCount == 1)
        try await sender.send(try ProximityDatagram(rssi: -45, advert: Self.advertA).bytes, to: port)
        #expect(await eventually { b.statistics.received == 3 })
        #expect(a.statistics.received == 2, "a stopped scanner hears nothing more")
        #expect(hub.receivedCount == 3)
        await b.stop()
        #expect(hub.attachedCount == 0)
        await sender.close()
        await hub.close()
        #expect(!hub.isOpen)
    }

    @Test("an advertiser on the hub sends to the hub's scan socket and leaves the shared socket open when it stops")
    func sharedSendSocket() async throws {
        let hub = try await ProximityHub.start(group: MultiThreadedEventLoopGroup.singleton)
        // The target (nobody listens on port 9) is replaced by the hub's scan socket.
        let elsewhere = ProximityEndpoint(host: "127.0.0.1", port: 9)
        for (advert, name) in [(Self.advertA, "A"), (Self.advertB, "B")] {
            let scanner = scanner(on: hub, accepting: advert, as: name)
            try await scanner.start()
            let advertiser = try ProximityAdvertiser(
                advert: advert, configuration: .init(target: elsewhere), sharing: hub, logger: quietLogger)
            #expect(advertiser.configuration.target == hub.scanEndpoint)
            try await advertiser.start()
            #expect(try await scanner.waitForMatch(timeout: .seconds(2)).match == name)
            await advertiser.stop()
            #expect(!advertiser.isRunning)
            #expect(hub.isOpen, "stopping an advertiser leaves the shared send socket open")
            await scanner.stop()
        }
        await hub.close()
    }

    @Test("a harness keeps its proximity sockets across sign-ins, also concurrent ones, and closes them on shutdown")
    func harnessKeepsSockets() async throws {
        let harness = try await HybridHarness.start(logger: quietLogger)
        let hub = try #require(harness.proximity)
        let endpoint = hub.scanEndpoint
        let accounts = [Account.make("hub-1"), Account.make("hub-2")]
        let phones = accounts.map { SimulatedPhone(passkeys: [$0.passkey]) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (phone, account) in zip(phones, accounts) {
                group.addTask {
                    for _ in 0..<2 {
                        _ = try await harness.signIn(on: phone, relyingParty: exampleRP, knownCredentials: [account.credential])
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(hub.scanEndpoint == endpoint)
        #expect(hub.receivedCount >= 4, "every sign-in's advert went through the harness's scan socket")
        #expect(hub.attachedCount == 0, "every sign-in's scanner detached")
        #expect(hub.isOpen)
        await harness.shutdown()
        #expect(!hub.isOpen)
    }
}
