import CTAP2
import Foundation
import HybridSim
import HybridSimTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One end-to-end test's world: a fresh `HYBRID_SIM_HOME` (both stores live there unless a test
/// says otherwise), and helpers that start `hybrid-sim desktop` / `phone` / `relay` as child
/// processes on ephemeral ports and read what they print.
final class EndToEndLab {
    let home: String
    private var children: [ChildProcess] = []

    init() throws {
        home = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-e2e-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
    }

    /// Kills whatever still runs and removes the directory.
    func tearDown() {
        for child in children { child.terminate() }
        try? FileManager.default.removeItem(atPath: home)
    }

    func file(_ name: String) -> String { home + "/" + name }

    var passkeyStore: String { file("passkeys.json") }
    var relyingPartyStore: String { file("rp-credentials.json") }

    /// Starts `hybrid-sim <arguments>`.
    func start(
        _ name: String, _ arguments: [String], environment: [String: String] = [:], standardInput: ChildProcess.Input = .none
    ) throws -> ChildProcess {
        let child = try ChildProcess(name, arguments, home: home, extraEnvironment: environment, standardInput: standardInput)
        children.append(child)
        return child
    }

    /// Starts another program (`/usr/bin/env` with `arguments`, e.g. a Python fixture).
    func startOther(_ name: String, _ arguments: [String], standardInput: ChildProcess.Input = .none) throws -> ChildProcess {
        let child = try ChildProcess(
            name, arguments, home: home, executable: URL(fileURLWithPath: "/usr/bin/env"), standardInput: standardInput)
        children.append(child)
        return child
    }

    // MARK: - Desktop

    /// A started desktop, once its QR code is shown.
    struct Desktop {
        let process: ChildProcess
        /// The `FIDO:/` URL.
        let url: String
        /// The lines printed before the URL: the QR code's terminal art (empty with `--json`).
        let art: [String]
        let relayURL: String
        let proximityURL: String
        /// The challenge the relying party announced on stderr.
        let challenge: [UInt8]
        let origin: String
        let rpId: String
    }

    /// Starts `hybrid-sim desktop` on ephemeral ports (embedded relay unless `arguments` has
    /// `--relay`) and waits for its QR code and its phone command line.
    func startDesktop(_ arguments: [String], json: Bool = false) async throws -> Desktop {
        var full = ["desktop", "--proximity-port", "0"]
        if !arguments.contains("--relay") { full += ["--relay-port", "0"] }
        full += arguments
        if json { full.append("--json") }
        let process = try start("desktop", full)
        let url: String
        var art: [String] = []
        if json {
            let lines = try await process.waitForOutput("qr event") {
                $0.contains { $0.hasPrefix("{\"event\":\"qr\"") }
            }
            let event = try JSONEvents.parse(try #require(lines.first { $0.hasPrefix("{\"event\":\"qr\"") }))
            url = try #require(event["url"] as? String)
        } else {
            let lines = try await process.waitForOutput("FIDO:/ line") { $0.contains { $0.hasPrefix("FIDO:/") } }
            let index = try #require(lines.firstIndex { $0.hasPrefix("FIDO:/") })
            url = lines[index]
            art = Array(lines[..<index])
        }
        let errors = try await process.waitForOutput("phone command line", in: \.standardError) { lines in
            lines.contains { $0.hasPrefix("phone command:") }
        }
        let command = try #require(errors.first { $0.hasPrefix("phone command:") })
        let relying = try #require(errors.first { $0.hasPrefix("relying party:") })
        return Desktop(
            process: process,
            url: url,
            art: art,
            relayURL: try #require(Self.word(after: "--relay ", in: command)),
            proximityURL: try #require(Self.word(after: "--proximity ", in: command)),
            challenge: try #require(
                Self.word(after: "challenge ", in: relying).flatMap { Base64URL.decode(String($0.dropLast())) }
            ),
            origin: try #require(Self.word(after: "origin ", in: relying)).trimmingCharacters(
                in: CharacterSet(charactersIn: ",")
            ),
            rpId: try #require(Self.rpId(in: relying))
        )
    }

    /// The word following `marker` in `line`.
    static func word(after marker: String, in line: String) -> String? {
        guard let range = line.range(of: marker) else { return nil }
        return line[range.upperBound...].split(separator: " ").first.map(String.init)
    }

    /// `example.com` in "registration of alice @ example.com (…" or "sign-in to example.com with …".
    private static func rpId(in line: String) -> String? {
        if let at = word(after: " @ ", in: line) { return at }
        return word(after: "sign-in to ", in: line)
    }

    /// Writes the desktop's terminal art to a file, as a person copying the terminal would.
    func capture(_ desktop: Desktop, name: String = "capture.txt") throws -> String {
        let path = file(name)
        try (desktop.art.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    // MARK: - Phone

    /// Starts `hybrid-sim phone` against `desktop`'s relay and scanner.
    func startPhone(for desktop: Desktop, _ arguments: [String]) throws -> ChildProcess {
        try start("phone", ["phone", "--relay", desktop.relayURL, "--proximity", desktop.proximityURL] + arguments)
    }

    // MARK: - Relay

    /// Starts `hybrid-sim relay --port 0` (with `extra` flags) and returns it with its URL.
    func startRelay(_ extra: [String] = []) async throws -> (ChildProcess, String) {
        let relay = try start("relay", ["relay", "--port", "0", "--log-level", "warning"] + extra)
        let lines = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        let line = try #require(lines.first { $0.contains("ws://") })
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("ws://") }).description
        return (relay, url)
    }

    // MARK: - Results

    /// The pretty credential JSON the desktop printed after the URL.
    static func credentialJSON(_ desktop: Desktop) throws -> [UInt8] {
        let lines = desktop.process.standardOutput.lines
        let index = try #require(lines.firstIndex(of: desktop.url))
        let json = lines[(index + 1)...].joined(separator: "\n")
        #expect(json.hasPrefix("{"), "expected JSON after the URL, got \(json)")
        return Array(json.utf8)
    }

    /// The expectation for the independent verifier.
    static func expectation(
        _ desktop: Desktop,
        requireUserVerification: Bool = false
    ) -> WebAuthnResponseVerifier.Expectation {
        WebAuthnResponseVerifier.Expectation(
            challenge: desktop.challenge,
            origin: desktop.origin,
            rpId: desktop.rpId,
            requireUserVerification: requireUserVerification
        )
    }

    /// A loopback TCP (or UDP) port nothing listens on (bound and released).
    static func closedPort(udp: Bool = false) throws -> Int {
        let (fd, port) = try boundSocket(udp: udp, listening: false)
        close(fd)
        return port
    }

    /// A socket bound to a free loopback port (and listening, for TCP with `listening`), without
    /// `SO_REUSEADDR`/`SO_REUSEPORT`, so nothing else can bind the port while it is open; the
    /// caller closes it.
    static func boundSocket(udp: Bool = false, listening: Bool, port: UInt16 = 0) throws -> (fd: CInt, port: Int) {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ChildProcessError("socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && (!listening || listen(fd, 1) == 0) && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw ChildProcessError("bind() failed")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }
}

/// Checks of what a failed process printed.
enum FailureOutput {
    /// The process printed exactly one `error:` line on stderr, as its last line; returns it.
    @discardableResult
    static func singleErrorLine(_ process: ChildProcess, sourceLocation: SourceLocation = #_sourceLocation) -> String {
        let lines = process.standardError.lines
        let errors = lines.filter { $0.hasPrefix("error:") }
        #expect(errors.count == 1, "expected one error line\n\(process.transcript)", sourceLocation: sourceLocation)
        #expect(
            lines.last?.hasPrefix("error:") == true,
            "the error line must be last\n\(process.transcript)",
            sourceLocation: sourceLocation
        )
        return errors.first ?? ""
    }

    /// Runs `hybrid-sim <arguments>` in `lab` to its end and checks that it exits `status` with
    /// ``singleErrorLine(_:sourceLocation:)`` equal to `line`; returns the process for more checks.
    @discardableResult
    static func expect(
        _ lab: EndToEndLab, _ arguments: [String], status: Int32, line: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> ChildProcess {
        let program = try lab.start(arguments[0], arguments)
        #expect(try await program.waitForExit() == status, "\(program.transcript)", sourceLocation: sourceLocation)
        #expect(singleErrorLine(program, sourceLocation: sourceLocation) == line, sourceLocation: sourceLocation)
        return program
    }
}

/// `--json` event lines.
enum JSONEvents {
    static func parse(_ line: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8))
        return try #require(object as? [String: Any], "not a JSON object: \(line)")
    }

    /// Every stdout line parsed; each must be a JSON object with an `event`.
    static func all(_ process: ChildProcess) throws -> [[String: Any]] {
        try process.standardOutput.lines.map { line in
            let event = try parse(line)
            #expect(event["event"] is String, "no event name in \(line)")
            return event
        }
    }
}
