import HybridCore
import NIOCore
import NIOPosix

/// The lean generator's phases (``RelayLoadBenchmark/Generator/lean``): both connections of a tunnel
/// live on one of the generator's own event loops, a ping-pong round runs entirely in their
/// handlers (the phone side echoes in its `channelRead`, the desktop side starts the next round in
/// its own), and writes are flushed once per read burst. Only the open and close phases await, once
/// per tunnel, not per message.
extension RelayLoadBenchmark {
    /// One open tunnel of the lean generator: its two connections and its rounds. Confined to `loop`.
    ///
    /// `@unchecked Sendable`: the phases hand it between tasks, but only ever touch it on `loop`.
    final class LeanPair: @unchecked Sendable {
        let loop: EventLoop
        let phone: LeanRelayPeer
        let phoneChannel: Channel
        let desktop: LeanRelayPeer
        let desktopChannel: Channel
        private var payload = ByteBuffer()
        private var ping = ByteBuffer()
        private var pong = ByteBuffer()
        private var roundsLeft = 0
        private var roundStart = NIODeadline.now()
        private var samples: [Double] = []
        private var finished: EventLoopPromise<(samples: [Double], failure: TunnelFailure?)>?

        init(loop: EventLoop, phone: (LeanRelayPeer, Channel), desktop: (LeanRelayPeer, Channel)) {
            self.loop = loop
            (self.phone, self.phoneChannel) = phone
            (self.desktop, self.desktopChannel) = desktop
        }

        /// Runs `rounds` rounds of `payload`; the future gets the round trips (ms) and the failure, if any.
        func run(rounds: Int, payload bytes: [UInt8]) -> EventLoopFuture<(samples: [Double], failure: TunnelFailure?)> {
            let promise = loop.makePromise(of: (samples: [Double], failure: TunnelFailure?).self)
            finished = promise
            payload = ByteBuffer(bytes: bytes)
            ping = LeanRelayPeer.binaryFrame(bytes)
            pong = LeanRelayPeer.binaryFrame(bytes)
            roundsLeft = rounds
            samples.reserveCapacity(rounds)
            // Weak: a run that fails (a relay gone mid-measurement) drops its pairs while their
            // connections may still end later and call these.
            phone.onMessage = { [weak self] message in
                guard let self else { return }
                guard message == self.payload else { return self.finish(Self.changed) }
                self.phone.write(self.pong)
            }
            desktop.onMessage = { [weak self] message in
                guard let self else { return }
                guard message == self.payload else { return self.finish(Self.changed) }
                self.samples.append(Double((NIODeadline.now() - self.roundStart).nanoseconds) / 1e6)
                self.roundsLeft -= 1
                if self.roundsLeft > 0 { self.startRound() } else { self.finish(nil) }
            }
            let onEnd: (RuntimeError) -> Void = { [weak self] error in self?.finish(TunnelFailure(error)) }
            phone.onEnd = onEnd
            desktop.onEnd = onEnd
            if let error = phone.endError ?? desktop.endError {
                // The relay closed the tunnel while it was held (e.g. its idle timeout): that, not
                // a timeout of the first round, is the failure.
                finish(TunnelFailure(error))
            } else if rounds > 0 {
                startRound()
                desktop.flush()
            } else {
                finish(nil)
            }
            return promise.futureResult
        }

        private func startRound() {
            roundStart = .now()
            desktop.write(ping)
        }

        /// Fails the rounds if the current one has run longer than `timeout` (the watchdog's check).
        func checkTimeout(_ timeout: TimeAmount, now: NIODeadline) {
            if finished != nil, now - roundStart > timeout {
                finish(TunnelFailure("timeout", "a round took longer than \(Duration(timeout).humanReadable)"))
            }
        }

        private static let changed = TunnelFailure("payload changed in transit", "the message differed from the one sent")

        private func finish(_ failure: TunnelFailure?) {
            guard let promise = finished else { return }
            finished = nil
            phone.onMessage = nil
            desktop.onMessage = nil
            promise.succeed((samples, failure))
        }

        /// Closes the tunnel from the desktop side (the relay closes the phone side alike) and
        /// returns once both connections are closed, or after `timeout` with them dropped.
        func close(timeout: TimeAmount) -> EventLoopFuture<Void> {
            phone.onEnd = nil
            desktop.onEnd = nil
            desktop.sendClose()
            let channels = [desktopChannel, phoneChannel]
            let timer = loop.scheduleTask(in: timeout) { for channel in channels { channel.close(promise: nil) } }
            return EventLoopFuture.andAllComplete(channels.map(\.closeFuture), on: loop).always { _ in timer.cancel() }
        }
    }

    /// Opens one tunnel on `loop`: the phone side (`/cable/new`), then the desktop side.
    static func openLeanPair(_ config: Configuration, on loop: EventLoop) async -> Result<LeanPair, RuntimeError> {
        let tunnelID = HostileWire.randomBytes(HybridConstants.tunnelIDSize)
        let phone: (LeanRelayPeer, Channel, [UInt8]?)
        do {
            phone = try await connectLean(config, path: TunnelServicePath.new(tunnelID: tunnelID).path, on: loop)
        } catch {
            return .failure(runtimeError(error))
        }
        guard let routing = phone.2, routing.count == HybridConstants.routingIDSize else {
            phone.1.close(promise: nil)
            return .failure(RuntimeError(.handshakeFailed, "no X-caBLE-Routing-ID on /cable/new"))
        }
        do {
            let desktop = try await connectLean(
                config, path: TunnelServicePath.connect(routingID: routing, tunnelID: tunnelID).path, on: loop)
            return .success(LeanPair(loop: loop, phone: (phone.0, phone.1), desktop: (desktop.0, desktop.1)))
        } catch {
            phone.1.close(promise: nil)
            return .failure(runtimeError(error))
        }
    }

    /// Connects and upgrades one lean connection; bounded by the configuration's timeout.
    private static func connectLean(_ config: Configuration, path: String, on loop: EventLoop) async throws
        -> (LeanRelayPeer, Channel, [UInt8]?)
    {
        let upgrade = loop.makePromise(of: [UInt8]?.self)
        let peer = LeanRelayPeer(
            path: path, authority: WebSocketURL.authority(host: config.host, port: config.port), maxMessageSize: max(config.payloadSize, 65536),
            upgrade: upgrade)
        let timeout = TimeAmount(config.timeout)
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(peer) }
            }
        let channel: Channel
        do {
            channel = try await bootstrap.connect(host: config.host, port: config.port).get()
        } catch {
            let failure = RuntimeError(
                .connectionFailed, "connect to \(WebSocketURL.authority(host: config.host, port: config.port)): \(RuntimeError.systemReason(error))")
            upgrade.fail(failure)
            throw failure
        }
        let timer = loop.scheduleTask(in: timeout) {
            upgrade.fail(RuntimeError(.timeout, "no upgrade within \(config.timeout)"))
            channel.close(promise: nil)
        }
        // Cancelled on the loop as soon as the upgrade is decided, not when the waiting task
        // resumes: an upgrade that succeeds just before the deadline keeps its connection.
        upgrade.futureResult.whenComplete { _ in timer.cancel() }
        do {
            let routing = try await upgrade.futureResult.get()
            return (peer, channel, routing)
        } catch {
            channel.close(promise: nil)
            throw error
        }
    }

    /// Runs every tunnel's rounds at once on the generator's loops, with a watchdog that fails a
    /// tunnel whose current round has taken longer than the timeout.
    static func leanRounds(_ pairs: [LeanPair], _ config: Configuration) async -> RoundResults {
        let payload = [UInt8](repeating: 0xA5, count: config.payloadSize)
        let timeout = TimeAmount(config.timeout)
        let loops = Dictionary(grouping: pairs, by: { ObjectIdentifier($0.loop) }).values
        var watchdogs: [RepeatedTask] = []
        var futures: [EventLoopFuture<(samples: [Double], failure: TunnelFailure?)>] = []
        futures.reserveCapacity(pairs.count)
        for group in loops {
            let loop = group[0].loop
            guard
                let started = try? await loop.submit({
                    group.map { $0.run(rounds: config.rounds, payload: payload) }
                }).get()
            else {
                // The loop would not take the work: its tunnels are failures, not missing samples.
                futures += group.map { _ in loop.makeFailedFuture(RuntimeError(.connectionFailed, "generator loop unavailable")) }
                continue
            }
            futures += started
            watchdogs.append(
                loop.scheduleRepeatedTask(initialDelay: .milliseconds(250), delay: .milliseconds(250)) { _ in
                    let now = NIODeadline.now()
                    for pair in group { pair.checkTimeout(timeout, now: now) }
                })
        }
        var results = RoundResults()
        results.samples.reserveCapacity(pairs.count * config.rounds)
        for future in futures {
            do {
                let result = try await future.get()
                results.add(result.samples, result.failure)
            } catch {
                results.add([], TunnelFailure(RelayLoadBenchmark.runtimeError(error)))
            }
        }
        for watchdog in watchdogs { watchdog.cancel() }
        return results
    }
}
