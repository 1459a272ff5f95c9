import HybridRuntime
import Testing

@Suite("Relay under load")
struct RelayLoadTests {
    @Test("200 concurrent tunnels all work; afterwards no tunnel, connection or descriptor is left")
    func twoHundredTunnels() async throws {
        // Warm up: the first use of the NIO singleton loops opens their epoll/eventfd descriptors.
        try await withRelay { _, endpoint in await (try openTunnel(endpoint)).close() }
        let baseline = openFileDescriptorCount()

        var configuration = RelayConfiguration()
        configuration.maxOpenTunnels = 256
        let relay = TunnelRelay(configuration: configuration)
        let endpoint = try await relay.start()
        let count = 200
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<count {
                group.addTask {
                    // 200 upgrades at once in a debug build: a loaded machine may take more than the usual 5 s.
                    let ends = try await openTunnel(endpoint, timeout: .seconds(30))
                    var ok = true
                    for round in 0..<3 {
                        let message: [UInt8] = [UInt8(index & 0xFF), UInt8(index >> 8), UInt8(round)]
                        try await ends.phone.send(message)
                        try await ends.desktop.send(message.reversed())
                        let atDesktop = try await ends.desktop.receive(timeout: .seconds(10))
                        let atPhone = try await ends.phone.receive(timeout: .seconds(10))
                        ok = ok && atDesktop == message && atPhone == message.reversed()
                    }
                    await ends.close()
                    return ok
                }
            }
            var all: [Bool] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(results.count == count)
        #expect(results.allSatisfy { $0 })
        #expect(relay.statistics.tunnelsOpened == count)
        #expect(relay.statistics.tunnelsJoined == count)
        #expect(relay.statistics.messagesRelayed == count * 6)
        #expect(await eventually { relay.openTunnelCount == 0 && relay.statistics.openConnections == 0 })
        await relay.shutdown()

        // 200 tunnels held about 800 descriptors (client and relay side of 400 connections). Once
        // everything is closed the count must come back to the baseline. Other tests run in
        // parallel in this process and open their own sockets, so allow a small slack and give
        // them time to finish; a leak of even 1 % of the tunnels' sockets would exceed it.
        let slack = 8
        let settled = await eventually(timeout: .seconds(15)) { openFileDescriptorCount() <= baseline + slack }
        #expect(settled, "descriptors: baseline \(baseline), now \(openFileDescriptorCount())")
    }
}
