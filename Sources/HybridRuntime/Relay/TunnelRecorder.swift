import CTAP2
import Foundation
import HybridCore
import HybridFiles
import Logging
import NIOCore

/// Records one tunnel for `hybrid-sim relay --record DIR`: every relayed message (after the test-only
/// fault injector, so exactly what the peer received), attachments and the closure, as a
/// ``TunnelRecording``. The file `DIR/<start ms>-<routing ID>.hsrec` is written once, when the tunnel
/// closes (a few kilobytes, written synchronously on the relay's event loop: recording is a
/// debugging aid, not for a loaded relay).
///
/// Confined to the relay's event loop, like ``RelayTunnel``.
final class TunnelRecorder {
    private let directory: String
    private let startMilliseconds: UInt64
    private let start = NIODeadline.now()
    private let flow: TunnelRecording.Flow
    private let tunnelID: [UInt8]
    private let routingID: [UInt8]
    private let logger: Logger
    private var entries: [TunnelRecording.Entry] = []
    private var finished = false

    /// The relay's info-line budget: peers decide how many tunnels there are, so "recorded to" lines
    /// share it with "tunnel opened" (Docs/RELAY.md).
    private let logLimiter: RelayLogLimiter

    init(
        directory: String, flow: TunnelRecording.Flow, tunnelID: [UInt8], routingID: [UInt8], logger: Logger,
        logLimiter: RelayLogLimiter
    ) {
        self.logLimiter = logLimiter
        self.directory = directory
        self.startMilliseconds = UInt64(max(0, Date().timeIntervalSince1970 * 1000))
        self.flow = flow
        self.tunnelID = tunnelID
        self.routingID = routingID
        self.logger = logger
    }

    private var elapsed: UInt64 { UInt64(max(0, (NIODeadline.now() - start).nanoseconds)) }

    /// A message `side` sent, as forwarded (or buffered) to the other side.
    func message(from side: TunnelSide, _ bytes: [UInt8]) {
        entries.append(.init(nanoseconds: elapsed, event: .message(side == .creator ? .creatorToJoiner : .joinerToCreator, bytes)))
    }

    /// `side`'s WebSocket attached.
    func attached(_ side: TunnelSide) {
        entries.append(.init(nanoseconds: elapsed, event: .attached(side == .creator ? .creator : .joiner)))
    }

    /// The tunnel closed: writes the file (once).
    func finish(code: WebSocketCloseCode?, reason: String) {
        guard !finished else { return }
        finished = true
        entries.append(.init(nanoseconds: elapsed, event: .closed(code: code?.rawValue, reason: reason)))
        let recording = TunnelRecording(
            startMilliseconds: startMilliseconds, flow: flow, tunnelID: tunnelID, routingID: routingID, entries: entries)
        let path = (directory as NSString).appendingPathComponent("\(startMilliseconds)-\(Hex.encode(routingID, uppercase: true)).hsrec")
        // Mode 0600 from the start: a recording holds the tunnel's full IDs and, with a key log, its plaintext.
        do {
            try FileWriter.replacePrivately(path, with: recording.encode())
            logLimiter.info(logger, "tunnel recorded to \(path)")
        } catch {
            logger.warning("could not write the tunnel recording \(path): \(error)")
        }
    }
}
