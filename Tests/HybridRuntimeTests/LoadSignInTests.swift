import CTAP2
import HybridCore
import HybridRuntime
import Testing

@Suite("Sign-ins under load", .timeLimit(.minutes(3)))
struct LoadSignInTests {
    @Test("200 concurrent sign-ins through one relay all verify; afterwards no tunnel and no descriptor is left")
    func twoHundredConcurrentSignIns() async throws {
        let count = 200
        var configuration = RelayConfiguration()
        configuration.maxOpenTunnels = 2 * count
        // Generous limits: under load on a small machine a step may wait its turn for a while; this
        // test is about completing and cleaning up, not about latency.
        var generous = HybridHarness.TransactionOptions()
        generous.timeouts = SessionTimeouts(
            advert: .seconds(60), connect: .seconds(30), handshake: .seconds(60), message: .seconds(30),
            userAction: .seconds(30))
        let options = generous

        // The gate keeps this test from running at the same time as another machine-loading test.
        try await HeavyLoadGate.exclusively {
            try await withHarness(configuration) { harness in
                try await Self.signIns(count, options: options, on: harness)
            }
        }
    }

    private static func signIns(
        _ count: Int, options: HybridHarness.TransactionOptions, on harness: HybridHarness
    ) async throws {
        // Warm up with one sign-in: the first use of the NIO singleton event loops and of the
        // Swift concurrency pool creates their epoll/eventfd/timerfd descriptors lazily. They
        // are not leaks and must not count against the comparison below.
        let warmUp = Account.make("warm-up")
        _ = try await harness.signIn(
            on: SimulatedPhone(passkeys: [warmUp.passkey]), relyingParty: exampleRP,
            knownCredentials: [warmUp.credential], options: options)
        #expect(await eventually { harness.relay.openTunnelCount == 0 })
        let baseline = openFileDescriptorCount()

        // One phone per account, each already holding its passkey (made directly, not registered).
        let accounts = (0..<count).map { Account.make("user-\($0)") }
        let results = await withTaskGroup(of: (Int, Result<RegisteredCredential, any Error>).self) { group in
            var all: [(Int, Result<RegisteredCredential, any Error>)] = []
            for (index, account) in accounts.enumerated() {
                group.addTask {
                    let phone = SimulatedPhone(passkeys: [account.passkey])
                    let result = await Result {
                        try await harness.signIn(
                            on: phone, relyingParty: exampleRP, knownCredentials: [account.credential],
                            options: options)
                    }
                    return (index, result)
                }
            }
            for await result in group { all.append(result) }
            return all
        }

        var failures: [String] = []
        for (index, result) in results {
            switch result {
            case .success(let credential):
                if credential.credentialId != accounts[index].credential.credentialId || credential.signCount != 1 {
                    failures.append("#\(index): wrong credential or counter \(credential.signCount)")
                }
            case .failure(let error):
                failures.append("#\(index): \(error)")
            }
        }
        #expect(results.count == count)
        #expect(failures.isEmpty, "\(failures.count) of \(count) failed, e.g. \(failures.prefix(5))")
        #expect(harness.relay.statistics.tunnelsOpened == count + 1)
        #expect(harness.relay.statistics.tunnelsJoined == count + 1)

        let drained = await eventually(timeout: .seconds(10)) {
            harness.relay.openTunnelCount == 0 && harness.relay.statistics.openConnections == 0
        }
        #expect(drained, "open tunnels \(harness.relay.openTunnelCount), connections \(harness.relay.statistics.openConnections)")

        // In flight the 200 sign-ins held about 1,200 descriptors (two WebSocket connections and
        // their two relay-side sockets, a UDP scanner and a UDP advertiser each). Afterwards the
        // count must come back to the baseline. Other suites run in parallel in this process and
        // open sockets of their own, and a scanner is stopped just after its sign-in returns, so
        // allow a small slack and a few seconds: a leak of even 1 % of the sign-ins' sockets
        // (12 descriptors) would exceed it.
        let slack = 8
        let settled = await eventually(timeout: .seconds(15)) { openFileDescriptorCount() <= baseline + slack }
        #expect(settled, "descriptors: baseline \(baseline), now \(openFileDescriptorCount())")
    }
}
