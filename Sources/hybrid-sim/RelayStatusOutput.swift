import Foundation
import HybridRuntime
import HybridSim
import Synchronization

/// What `hybrid-sim relay` tells its operator besides its log: the ready line, its status (on
/// SIGUSR1 and every `--status-interval`) and, when it stops, what it did since its start.
///
/// Without `--json` these are text: the ready line on stdout, `status: …` lines on stderr (after the
/// time, as the log's lines begin, so that a periodic status in a log file says when). With
/// `--json` stdout carries one event per line instead (`listening` in place of the ready line, then
/// `status` and `stopped`, each with the counters); stderr is the same either way, so an operator
/// watching it sees the same lines whether or not a script reads stdout.
final class RelayStatusOutput: Sendable {
    /// Whether stdout carries JSON events.
    let json: Bool
    /// The `stopped` event was written: a status asked for after it (a late SIGUSR1) prints nothing,
    /// so `stopped` stays the last line.
    private let ended = Mutex(false)

    init(json: Bool) {
        self.json = json
    }

    /// The ready line: it contains `ws://HOST:PORT` in both forms (the contract).
    func listening(url: String) {
        if json {
            printStatus(JSONLine(event: "listening", [("url", .string(url))]).text)
        } else {
            printStatus("hybrid-sim relay listening on \(url)")
        }
    }

    /// The status line on stderr (whatever `--log-level`: it was asked for) and, with `--json`, a
    /// `status` event on stdout.
    func status(_ statistics: RelayStatistics) {
        ended.withLock { ended in
            guard !ended else { return }
            progressLine("\(LogTime.stamp()) status: \(Self.status(statistics)); since its start: \(Self.summary(statistics))")
            if json { printStatus(JSONLine(event: "status", Self.members(statistics)).text) }
        }
    }

    /// After the shutdown: with `--json` a `stopped` event (the signal and the final counters) as
    /// the last stdout line. The log line saying the same is the caller's.
    func stopped(_ statistics: RelayStatistics, signal: String) {
        ended.withLock { ended in
            ended = true
            if json { printStatus(JSONLine(event: "stopped", [("signal", .string(signal))] + Self.members(statistics)).text) }
        }
    }

    /// What the relay holds now, for the status line.
    static func status(_ statistics: RelayStatistics) -> String {
        "\(statistics.openConnections) connection(s) and \(statistics.openTunnels) tunnel(s) open, "
            + "\(statistics.waitingContacts) contact request(s) waiting for their phone"
    }

    /// What the relay did, for the status line and the line it logs when it stops.
    static func summary(_ statistics: RelayStatistics) -> String {
        var text = "\(statistics.tunnelsOpened) tunnel(s) opened, \(statistics.tunnelsJoined) joined, \(statistics.messagesRelayed) message(s) relayed"
        let refused = statistics.rejectedRequests.sorted { $0.key < $1.key }.map { "\($0.key) ×\($0.value)" }
        text += refused.isEmpty ? ", nothing refused" : "; refused: \(refused.joined(separator: ", "))"
        if statistics.recordingsNotWritten > 0 {
            let why = statistics.lastRecordingFailure.map { " (the last: \($0))" } ?? ""
            text += "; \(statistics.recordingsNotWritten) recording(s) could not be written\(why)"
        }
        return text
    }

    /// The counters of a `status` or `stopped` event (Docs/CLI.md): what is open now, then what
    /// happened since the start; `refused` by HTTP status and `tunnelsClosed` by close code are
    /// objects keyed by the number as a string, `{}` when there is none.
    static func members(_ statistics: RelayStatistics) -> [(String, JSONLine.Value)] {
        [
            ("connections", .int(statistics.openConnections)),
            ("tunnels", .int(statistics.openTunnels)),
            ("waitingContacts", .int(statistics.waitingContacts)),
            ("tunnelsOpened", .int(statistics.tunnelsOpened)),
            ("tunnelsJoined", .int(statistics.tunnelsJoined)),
            ("messagesRelayed", .int(statistics.messagesRelayed)),
            ("bytesRelayed", .int(statistics.bytesRelayed)),
            ("messagesBuffered", .int(statistics.messagesBuffered)),
            ("revocationsReceived", .int(statistics.revocationsReceived)),
            ("refused", .raw(countsObject(statistics.rejectedRequests))),
            ("tunnelsClosed", .raw(countsObject(statistics.tunnelsClosed))),
            ("recordingsNotWritten", .int(statistics.recordingsNotWritten)),
        ]
    }

    /// The shutdown's error line when the `--contacts` file could not be saved (only a memory that
    /// changed since its last save is saved then): why, what is lost, and what the next start will
    /// do with `file`.
    static func contactsNotSaved(_ problem: String, file: String) -> String {
        let directory = URL(fileURLWithPath: file).deletingLastPathComponent().path
        // Removed, or replaced by a file: the next start refuses the path (open's own check).
        var isDirectory: ObjCBool = false
        let next =
            FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) && isDirectory.boolValue
            ? "the next start reads \(file) as it is now" : "the next start refuses \(file) until \(directory) is a directory again"
        return "--contacts: the contact memory is not saved (\(problem)): the phones that listened, and the contact IDs "
            + "revoked, since its last save are not in the file; \(next)"
    }

    /// `{"404":2,"503":1}`: counts by number, in ascending order.
    private static func countsObject<Key: BinaryInteger>(_ counts: [Key: Int]) -> String {
        "{" + counts.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
    }
}
