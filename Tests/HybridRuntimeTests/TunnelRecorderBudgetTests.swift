import Foundation
import HybridCore
@testable import HybridRuntime
import Logging
import Testing

/// `--record`'s memory bound (``ByteBudget``, ``TunnelRecorder/sharedBudget``): a tunnel whose messages would pass it is not
/// recorded at all, and every recorder gives its bytes back when its tunnel closes.
@Suite("Relay recording: the budget of messages held until their tunnels close")
struct TunnelRecorderBudgetTests {
    private static func recorder(in directory: String, routing: UInt8, budget: ByteBudget) -> TunnelRecorder {
        TunnelRecorder(
            directory: directory, flow: .qr, tunnelID: [UInt8](repeating: routing, count: 16), routingID: [routing, 0, 0],
            logger: Logger(label: "test", factory: { _ in SwiftLogNoOpLogHandler() }), logLimiter: RelayLogLimiter(), budget: budget)
    }

    private static func files(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".hsrec") }.sorted()
    }

    @Test("past the budget a tunnel is dropped whole (no file), the others are written, and the budget is back to zero")
    func budget() throws {
        let directory = NSTemporaryDirectory() + "hybridsim-record-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let budget = ByteBudget(limit: 100)

        let kept = Self.recorder(in: directory, routing: 1, budget: budget)
        let dropped = Self.recorder(in: directory, routing: 2, budget: budget)
        kept.message(from: .creator, [UInt8](repeating: 1, count: 40))
        dropped.message(from: .creator, [UInt8](repeating: 2, count: 40))
        #expect(budget.reserved == 80)
        // 80 + 40 > 100: the second tunnel's recording goes, and gives its 40 back.
        dropped.message(from: .joiner, [UInt8](repeating: 2, count: 40))
        #expect(budget.reserved == 40)
        dropped.message(from: .joiner, [UInt8](repeating: 2, count: 10))  // not recorded any more
        #expect(budget.reserved == 40)
        kept.message(from: .joiner, [UInt8](repeating: 1, count: 60))
        #expect(budget.reserved == 100)

        dropped.finish(code: .normalClosure, reason: "")
        #expect(Self.files(in: directory).isEmpty, "a dropped recording was written")
        kept.finish(code: .normalClosure, reason: "")
        #expect(budget.reserved == 0)
        let files = Self.files(in: directory)
        #expect(files.count == 1 && files[0].hasSuffix("-010000.hsrec"), "\(files)")
        let recording = try TunnelRecording(decoding: Array(FileManager.default.contents(atPath: directory + "/" + files[0]) ?? Data()))
        let messages = recording.entries.compactMap { entry -> Int? in
            if case .message(_, let bytes) = entry.event { return bytes.count }
            return nil
        }
        #expect(messages == [40, 60])
    }
}
