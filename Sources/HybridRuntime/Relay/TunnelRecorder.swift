import CTAP2
import Foundation
import HybridCore
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

    init(directory: String, flow: TunnelRecording.Flow, tunnelID: [UInt8], routingID: [UInt8], logger: Logger) {
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
        if let reason = Self.writePrivately(recording.encode(), to: path) {
            logger.warning("could not write the tunnel recording \(path): \(reason)")
        } else {
            logger.info("tunnel recorded to \(path)")
        }
    }

    /// Writes `bytes` to `path` with mode 0600 from the start (a recording holds the tunnel's full
    /// IDs and, with a key log, its plaintext): a temporary file created 0600 and renamed into place.
    /// Returns the system's reason on failure.
    static func writePrivately(_ bytes: [UInt8], to path: String) -> String? {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return RuntimeError.systemReason(errno: errno) }
        var failure: Int32 = 0
        var offset = 0
        while failure == 0, offset < bytes.count {
            let count = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 {
                if errno != EINTR { failure = errno }
            } else {
                offset += count
            }
        }
        if close(fd) != 0, failure == 0 { failure = errno }
        if failure == 0, rename(temporary, path) != 0 { failure = errno }
        guard failure == 0 else {
            unlink(temporary)
            return RuntimeError.systemReason(errno: failure)
        }
        return nil
    }
}
