import CTAP2
import Foundation
import HybridCore
import HybridFiles
import Logging
import NIOCore

/// Records one tunnel for `hybrid-sim relay --record DIR`: every relayed message (after the test-only
/// fault injector, so exactly what the peer received), attachments and the closure, as a
/// ``TunnelRecording``. The file `DIR/<start ms>-<routing ID>.hsrec` is written once, when the tunnel
/// closes (a few kilobytes for a caBLE transaction, up to 2 MiB at the relay's message limits;
/// written synchronously on the relay's event loop: recording is a debugging aid, not for a loaded
/// relay). The messages recorded and not yet written count against a ``ByteBudget`` shared by
/// the process's recorders (``sharedBudget``, 64 MiB: 60 tunnels of 1.9 MB each took a relay from
/// 32 MB to 187 MB, and 1,024 tunnels at the message limits could hold 2 GiB): a tunnel whose next message would pass it is not recorded at all
/// (its messages so far are dropped; no partial file).
///
/// Confined to the relay's event loop, like ``RelayTunnel``.
final class TunnelRecorder {
    /// The budget every recorder of the process shares.
    static let sharedBudget = ByteBudget(limit: 64 << 20)

    private let directory: String
    private let startMilliseconds: UInt64
    private let start = NIODeadline.now()
    private let flow: TunnelRecording.Flow
    private let tunnelID: [UInt8]
    private let routingID: [UInt8]
    private let logger: Logger
    private var entries: [TunnelRecording.Entry] = []
    private var finished = false
    private let budget: ByteBudget
    /// Message bytes this recording holds against ``budget``.
    private var held = 0
    /// Dropped: the budget had no room for a message.
    private var dropped = false

    /// The relay's info-line budget: peers decide how many tunnels there are, so "recorded to" lines
    /// share it with "tunnel opened" (Docs/RELAY.md).
    private let logLimiter: RelayLogLimiter
    /// The relay's counters: a recording that cannot be written counts there, for its summary.
    private let statistics: RelayStatisticsBox?

    init(
        directory: String, flow: TunnelRecording.Flow, tunnelID: [UInt8], routingID: [UInt8], logger: Logger,
        logLimiter: RelayLogLimiter, budget: ByteBudget = TunnelRecorder.sharedBudget, statistics: RelayStatisticsBox? = nil
    ) {
        self.logLimiter = logLimiter
        self.statistics = statistics
        self.budget = budget
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
        guard !dropped else { return }
        guard budget.reserve(bytes.count) else {
            dropped = true
            entries = []
            budget.release(held)
            held = 0
            logLimiter.info(
                logger,
                "tunnel not recorded: the recordings held until their tunnels close would pass \(budget.limit >> 20) MiB (--record is a debugging aid)")
            return
        }
        held += bytes.count
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
        defer {
            entries = []
            budget.release(held)
            held = 0
        }
        guard !dropped else { return }
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
            statistics?.recordUnwrittenRecording(error.description)
        }
    }
}
