import Foundation
import HybridCore
import HybridRuntime
import NIOCore
import NIOPosix
import Synchronization
import Testing

/// Starts a relay on an ephemeral loopback port, runs `body`, and always shuts the relay down.
/// Two event loops whatever the machine's core count, for tests that need a relay with two shards
/// (and so the dispatcher thread): the singleton group has one loop on a one-core machine. Shared by
/// the tests, never shut down.
let twoLoopGroup = MultiThreadedEventLoopGroup(numberOfThreads: 2)

func withRelay<T>(
    _ configuration: RelayConfiguration = RelayConfiguration(),
    group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    _ body: (TunnelRelay, RelayEndpoint) async throws -> T
) async throws -> T {
    let relay = TunnelRelay(configuration: configuration, group: group)
    let endpoint = try await relay.start()
    do {
        let result = try await body(relay, endpoint)
        await relay.shutdown()
        return result
    } catch {
        await relay.shutdown()
        throw error
    }
}

/// 16 random bytes: a tunnel ID.
func randomTunnelID() -> [UInt8] {
    (0..<16).map { _ in UInt8.random(in: 0...255) }
}

/// Upper-case hex.
func upperHex(_ bytes: [UInt8]) -> String {
    bytes.map { String(format: "%02X", $0) }.joined()
}

/// The two ends of one tunnel through a relay, opened the QR-flow way.
struct TunnelEnds {
    /// Opened `/cable/new` (the creator).
    var phone: WebSocketTunnel
    /// Joined with `/cable/connect` (the joiner).
    var desktop: WebSocketTunnel
    var tunnelID: [UInt8]

    func close() async {
        await phone.close()
        await desktop.close()
    }
}

/// Opens `/cable/new` for a fresh tunnel ID: the creator's end, and the `/cable/connect/…` path
/// that joins that tunnel (with the routing ID the relay assigned).
func openCreator(
    _ endpoint: RelayEndpoint, options: WebSocketTunnel.Options = .init(), tunnelID: [UInt8] = randomTunnelID(),
    timeout: Duration = .seconds(5)
) async throws -> (phone: WebSocketTunnel, tunnelID: [UInt8], connectPath: String) {
    let phone = try await WebSocketTunnel.open(
        url: endpoint.url + TunnelServicePath.new(tunnelID: tunnelID).path,
        timeout: timeout,
        options: options
    )
    let routingID = try #require(phone.routingID)
    return (phone, tunnelID, TunnelServicePath.connect(routingID: routingID, tunnelID: tunnelID).path)
}

/// Opens `/cable/new` then `/cable/connect` for a fresh tunnel ID, each upgrade within `timeout`.
func openTunnel(
    _ endpoint: RelayEndpoint, options: WebSocketTunnel.Options = .init(), tunnelID: [UInt8] = randomTunnelID(),
    timeout: Duration = .seconds(5)
) async throws -> TunnelEnds {
    let creator = try await openCreator(endpoint, options: options, tunnelID: tunnelID, timeout: timeout)
    let desktop = try await WebSocketTunnel.open(url: endpoint.url + creator.connectPath, timeout: timeout, options: options)
    return TunnelEnds(phone: creator.phone, desktop: desktop, tunnelID: creator.tunnelID)
}

/// Expects `body` to throw a `RuntimeError` and returns it.
@discardableResult
func expectRuntimeError(
    _ code: RuntimeError.Code,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ body: () async throws -> Void
) async -> RuntimeError? {
    do {
        try await body()
        Issue.record("expected RuntimeError .\(code), nothing was thrown", sourceLocation: sourceLocation)
        return nil
    } catch let error as RuntimeError {
        #expect(error.code == code, "got \(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected RuntimeError .\(code), got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; returns the last result.
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Number of open file descriptors of this process (entries of /proc/self/fd).
func openFileDescriptorCount() -> Int {
    // The directory listing itself holds one descriptor while it runs; it is the same every time.
    (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// A lock-protected value that closures can share (a `Mutex` itself cannot be captured by them).
final class LockedBox<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    var value: Value { mutex.withLock { $0 } }

    func update(_ change: (inout Value) -> Void) {
        mutex.withLock { change(&$0) }
    }
}
