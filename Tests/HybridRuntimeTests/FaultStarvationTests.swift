import Dispatch
import Foundation
import HybridCore
import HybridRuntime
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOWebSocket
import Testing

/// A task executor on one dispatch queue whose thread a test can keep busy: a stand-in for a Swift
/// concurrency pool saturated by other work, so that a task resumes long after what it awaited
/// has happened.
final class StallableExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "hybrid-sim.test.stallable")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Keeps the executor's thread busy for `duration`, starting after `delay`.
    func stall(for duration: Duration, after delay: Duration = .zero) {
        let (seconds, attoseconds) = duration.components
        let (delaySeconds, delayAttoseconds) = delay.components
        let start = DispatchTime.now() + .nanoseconds(Int(delaySeconds * 1_000_000_000 + delayAttoseconds / 1_000_000_000))
        queue.asyncAfter(deadline: start) {
            Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
        }
    }
}

/// A tunnel service that answers the upgrade (with `fido.cable`) only after a delay, and calls
/// `onRequest` when the request arrives.
private func startSlowUpgradeServer(
    delay: TimeAmount, onRequest: @escaping @Sendable () -> Void
) async throws -> Channel {
    try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .childChannelInitializer { channel in
            channel.eventLoop.makeCompletedFuture {
                let upgrader = NIOTypedWebSocketServerUpgrader<Bool>(
                    shouldUpgrade: { channel, _ in
                        onRequest()
                        return channel.eventLoop.scheduleTask(in: delay) {
                            HTTPHeaders([("Sec-WebSocket-Protocol", "fido.cable")])
                        }.futureResult
                    },
                    upgradePipelineHandler: { channel, _ in channel.eventLoop.makeSucceededFuture(true) }
                )
                _ = try channel.pipeline.syncOperations.configureUpgradableHTTPServerPipeline(
                    configuration: .init(
                        upgradeConfiguration: .init(
                            upgraders: [upgrader],
                            notUpgradingCompletionHandler: { channel in channel.eventLoop.makeSucceededFuture(false) }
                        )
                    )
                )
            }
        }
        .bind(host: "127.0.0.1", port: 0)
        .get()
}

@Suite("Faults: a starved task pool", .timeLimit(.minutes(1)))
struct FaultStarvationTests {
    @Test("a tunnel whose upgrade completed in time survives a caller that resumes after the deadline")
    func upgradeSurvivesLateResumption() async throws {
        let executor = StallableExecutor()
        // The request arrives, 50 ms later the caller's executor stalls for 3 s, and 200 ms after the
        // request the 101 comes back: the upgrade completes 1.3 s before the 1.5 s budget ends, but
        // the task awaiting it can only resume at about 3 s.
        let server = try await startSlowUpgradeServer(delay: .milliseconds(200)) {
            executor.stall(for: .seconds(3), after: .milliseconds(50))
        }
        let port = try #require(server.localAddress?.port)
        let url = "ws://127.0.0.1:\(port)" + TunnelServicePath.new(tunnelID: randomTunnelID()).path
        let opening = Task(executorPreference: executor) {
            try await WebSocketTunnel.open(url: url, timeout: .milliseconds(1500), options: Self.quickClose)
        }
        let tunnel = try await opening.value
        // The connection must still be usable: the upgrade timer may not close it after the fact.
        await #expect(throws: Never.self) { try await tunnel.send([0x01, 0x02, 0x03]) }
        await tunnel.close()
        try? await server.close().get()
    }

    @Test("a send that completed in time does not close the connection when its caller resumes late")
    func sendSurvivesLateResumption() async throws {
        let executor = StallableExecutor()
        let server = try await startSlowUpgradeServer(delay: .zero) {}
        let port = try #require(server.localAddress?.port)
        let url = "ws://127.0.0.1:\(port)" + TunnelServicePath.new(tunnelID: randomTunnelID()).path
        var options = Self.quickClose
        options.sendTimeout = .milliseconds(500)
        let tunnel = try await WebSocketTunnel.open(url: url, timeout: .seconds(5), options: options)
        let sending = Task(executorPreference: executor) {
            // Queued behind this job: as soon as the send suspends, the executor stalls for 1.5 s
            // (three times the send timeout), so the completed send resumes only then.
            executor.stall(for: .milliseconds(1500))
            try await tunnel.send([0x01])
        }
        try await sending.value
        await #expect(throws: Never.self) { try await tunnel.send([0x02]) }
        await tunnel.close()
        try? await server.close().get()
    }

    /// The slow server never answers a close frame: do not wait 2 s for it.
    private static var quickClose: WebSocketTunnel.Options {
        var options = WebSocketTunnel.Options()
        options.closeTimeout = .milliseconds(100)
        return options
    }
}
