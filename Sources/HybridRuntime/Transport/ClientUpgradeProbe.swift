import NIOCore
import NIOEmbedded
import NIOHTTP1
import Synchronization

/// Feeds raw bytes, as a relay's answer, to the client's upgrade handler (``ClientUpgradeHandler``:
/// response head, 101 checks, refusal bodies however framed) on an `EmbeddedChannel`, with no
/// socket: the fuzz target for what a hostile relay can make a phone or desktop parse
/// (`Docs/ROBUSTNESS.md`).
package enum ClientUpgradeProbe {
    /// What the client made of one answer.
    package enum Outcome: Sendable, Equatable {
        /// A 101 that passed every check.
        case upgraded
        /// A refusal with this status.
        case rejected(Int)
        /// The answer was refused as broken (or the connection ended before a whole answer).
        case failed
        /// Still waiting after the connection ended: never allowed.
        case unresolved
    }

    /// The key the probe's request carries (RFC 6455 §1.3's sample), so an input can hold the
    /// matching `Sec-WebSocket-Accept` (`s3pPLMBiTxaQ9kYGzzhZRbK+xOo=`).
    package static let key = WebSocketUpgradeRequest.sampleKey

    /// Runs `bytes` as everything the relay sent, then ends the connection.
    package static func run(_ bytes: [UInt8]) -> Outcome {
        let channel = EmbeddedChannel()
        let promise = channel.eventLoop.makePromise(of: ClientUpgradeOutcome.self)
        let handler = ClientUpgradeHandler(
            path: "/cable/new/00", headers: [("Host", "relay.example")], key: key, promise: promise
        ) { _, head in
            .rejected(EmbeddedEventLoop().makeSucceededFuture((head.status, "")))  // stands for the installed pipeline
        }
        // Set on the embedded loop, which runs on this thread; the box only satisfies the checker.
        let result = Mutex(Outcome.unresolved)
        promise.futureResult.whenComplete { completed in
            let outcome: Outcome
            switch completed {
            case .success(.upgraded): outcome = .upgraded
            case .success(.rejected(let answer)):
                outcome = (try? answer.wait()).map { $0.0 == .switchingProtocols ? .upgraded : .rejected(Int($0.0.code)) } ?? .failed
            case .failure: outcome = .failed
            }
            result.withLock { $0 = outcome }
        }
        do {
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 40000)).wait()
            try channel.writeInbound(channel.allocator.buffer(bytes: bytes))
        } catch {
            // A handler error closes the channel; the promise says what happened.
        }
        while (try? channel.readOutbound(as: ByteBuffer.self)) != nil {}  // the request it wrote
        _ = try? channel.finish(acceptAlreadyClosed: true)
        return result.withLock { $0 }
    }
}
