import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `hybrid-sim demo` ended by a signal while its desktop runs: the children must go with it (they
/// outlived it by up to a step's timeout), and so must its temporary directory, which holds the
/// phone's private keys.
@Suite("End to end: demo interrupted")
struct EndToEndDemoSignalTests {
    /// The processes whose environment names `HYBRID_SIM_HOME=home` (the demo's children, wherever
    /// they were re-parented).
    private static func processes(inHome home: String) -> [String] {
        let marker = Array("HYBRID_SIM_HOME=\(home)".utf8) + [0]
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.filter { Int($0) != nil }.filter { pid in
            guard let environ = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
            return Array(environ).withUnsafeBufferPointer { bytes in
                bytes.count >= marker.count
                    && (0...(bytes.count - marker.count)).contains { start in
                        (start == 0 || bytes[start - 1] == 0) && Array(bytes[start..<(start + marker.count)]) == marker
                    }
            }
        }
    }

    @Test("SIGINT and SIGTERM while the desktop waits: the desktop and phone are stopped, the temporary directory removed, one error line, 130 / 143", arguments: [SIGINT, SIGTERM])
    func interrupted(signal: Int32) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try lab.start("demo", ["demo", "--timeout", "30"])
        let lines = try await demo.waitForOutput("the desktop's start", in: \.standardError) { lines in
            lines.contains { $0.contains("desktop │ waiting for a nearby phone") }
        }
        let announced = try #require(lines.first { $0.contains("fresh passkey and relying-party stores in ") })
        let home = try #require(EndToEndLab.word(after: "stores in ", in: announced))
        #expect(!Self.processes(inHome: home).isEmpty, "the desktop runs with HYBRID_SIM_HOME=\(home)")
        demo.signal(signal)
        #expect(try await demo.waitForExit(timeout: .seconds(10)) == 128 + signal, "\(demo.transcript)")
        let name = signal == SIGINT ? "SIGINT" : "SIGTERM"
        #expect(demo.standardError.lines.last?.hasPrefix("error: demo interrupted by \(name); stopped the ") == true, "\(demo.transcript)")
        // One final line: the stopped children are not reported as the demo's own failure too.
        #expect(demo.standardError.lines.filter { $0.hasPrefix("error: ") }.count == 1, "\(demo.transcript)")
        #expect(Self.processes(inHome: home).isEmpty, "children left running: \(Self.processes(inHome: home))")
        #expect(!FileManager.default.fileExists(atPath: home), "the temporary directory \(home) is left")
    }
}
