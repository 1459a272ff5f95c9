import Foundation
import HybridFiles
import HybridSim
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The built `hybrid-sim` executable. `swift build --build-tests` and `swift test` build every
/// product into the same directory as the test bundle, so it is found next to it; the
/// `HYBRID_SIM_BINARY` environment variable overrides the search.
enum HybridSimBinary {
    static func url() throws -> URL {
        if let override = ProcessInfo.processInfo.environment["HYBRID_SIM_BINARY"], !override.isEmpty {
            guard FileManager.default.isExecutableFile(atPath: override) else {
                throw ChildProcessError("HYBRID_SIM_BINARY=\(override) is not an executable file")
            }
            return URL(fileURLWithPath: override)
        }
        var searched: [String] = []
        // Linux runs the test bundle as an executable; macOS loads it (`…/HybridSimPackageTests.xctest`)
        // into xctest. A binary elsewhere (another scratch path) could be stale, so none is guessed.
        let starts =
            [URL(fileURLWithPath: CommandLine.arguments[0]), Bundle.main.bundleURL]
            + Bundle.allBundles.filter { $0.bundlePath.hasSuffix(".xctest") }.map(\.bundleURL)
        for start in starts {
            var directory = start.deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("hybrid-sim")
                searched.append(candidate.path)
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory.deleteLastPathComponent()
            }
        }
        throw ChildProcessError(
            "the hybrid-sim executable was not found next to the test bundle (looked at \(searched.joined(separator: ", "))); "
                + "run `swift build` (or plain `swift test`, which builds every product) first, or set HYBRID_SIM_BINARY"
        )
    }
}

struct ChildProcessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Text that reader threads append to and tests read. Kept as bytes and decoded when read: a
/// read may end inside a multi-byte character (the argument parser writes its error in pieces).
final class SharedText: Sendable {
    private let state = Mutex((bytes: Data(), closed: false))

    func append(_ data: Data) { state.withLock { $0.bytes.append(data) } }
    func close() { state.withLock { $0.closed = true } }
    var text: String { String(decoding: state.withLock { $0.bytes }, as: UTF8.self) }
    var isClosed: Bool { state.withLock { $0.closed } }
    var lines: [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
    }
    /// ``lines`` without the time a long-running program's lines begin with (`phone --listen`'s,
    /// a relay's log; ``LogTime``).
    var untimedLines: [String] { lines.map(LogTime.strip) }
}

/// One `hybrid-sim` child process with captured stdout and stderr, a hard time limit on every
/// wait, and a kill on every way out (``terminate()`` is idempotent; call it in `defer`).
final class ChildProcess {
    let name: String
    /// Started with posix_spawn rather than Foundation's `Process`, whose `run()` can crash on
    /// Linux (`ChildSpawn` says why): these tests start hundreds of children.
    private let process: ChildSpawn
    let standardOutput = SharedText()
    let standardError = SharedText()

    /// Where a child's standard input comes from.
    enum Input {
        /// `/dev/null`.
        case none
        /// A file, redirected.
        case file(String)
        /// A pipe that carries these bytes and then its end.
        case piped([UInt8])
        /// A pipe that carries nothing and stays open while this object lives: a read waits.
        case held
    }

    /// The writing end of a ``Input/held`` standard input.
    private var heldInput: FileHandle?

    /// Starts `hybrid-sim <arguments>` (or `executable`) with `HYBRID_SIM_HOME=home` and stdin from
    /// `standardInput`.
    init(
        _ name: String, _ arguments: [String], home: String, extraEnvironment: [String: String] = [:],
        executable: URL? = nil, standardInput: Input = .none
    ) throws {
        self.name = name
        var environment = ProcessInfo.processInfo.environment
        environment["HYBRID_SIM_HOME"] = home
        for (key, value) in extraEnvironment { environment[key] = value }
        // `/usr/bin/env` as the executable looks its first argument up in PATH, as Process did.
        let path = try (executable ?? HybridSimBinary.url()).path
        var input: FileHandle?
        var inputPipe: Pipe?
        var pipedBytes: [UInt8]?
        switch standardInput {
        case .none: break
        case .file(let file): input = try FileHandle(forReadingFrom: URL(fileURLWithPath: file))
        case .piped(let bytes):
            inputPipe = Pipe()
            pipedBytes = bytes
        case .held:
            inputPipe = Pipe()
            heldInput = inputPipe?.fileHandleForWriting
        }
        let out = Pipe()
        let err = Pipe()
        /// The child's ends, ours to close once it runs (or failed to start).
        func closeChildEnds() {
            try? out.fileHandleForWriting.close()
            try? err.fileHandleForWriting.close()
            try? inputPipe?.fileHandleForReading.close()
            try? input?.close()
        }
        do {
            process = try ChildSpawn(
                executable: path, arguments: arguments, environment: environment,
                input: inputPipe?.fileHandleForReading.fileDescriptor ?? input?.fileDescriptor,
                output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        } catch {
            closeChildEnds()
            throw error
        }
        closeChildEnds()
        // The readers first, so a child that writes before it reads cannot block the write below.
        Self.drain(out.fileHandleForReading, into: standardOutput)
        Self.drain(err.fileHandleForReading, into: standardError)
        if let pipe = inputPipe, let bytes = pipedBytes {
            let writer = pipe.fileHandleForWriting
            Thread.detachNewThread {
                try? writer.write(contentsOf: Data(bytes))
                try? writer.close()
            }
        }
    }

    /// Runs `executable` with `arguments` to its end (at most `timeout`, then SIGKILL), `input`
    /// on its standard input: for the short helper programs tests run (`flock`, a Python verifier).
    static func run(
        _ executable: String, _ arguments: [String], input: [UInt8]? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment, timeout: Duration = .seconds(30)
    ) throws -> (status: Int32, output: String, error: String, timedOut: Bool) {
        let out = Pipe(), err = Pipe(), stdin = Pipe()
        let child: ChildSpawn
        do {
            defer {
                try? out.fileHandleForWriting.close()
                try? err.fileHandleForWriting.close()
                try? stdin.fileHandleForReading.close()
            }
            child = try ChildSpawn(
                executable: executable, arguments: arguments, environment: environment,
                input: input == nil ? nil : stdin.fileHandleForReading.fileDescriptor,
                output: out.fileHandleForWriting.fileDescriptor, error: err.fileHandleForWriting.fileDescriptor)
        }
        let (output, error) = (SharedText(), SharedText())
        drain(out.fileHandleForReading, into: output)
        drain(err.fileHandleForReading, into: error)
        let writer = stdin.fileHandleForWriting
        if let input {
            Thread.detachNewThread {
                try? writer.write(contentsOf: Data(input))
                try? writer.close()
            }
        } else {
            try? writer.close()
        }
        let deadline = ContinuousClock.now + timeout
        while child.isRunning, ContinuousClock.now < deadline { usleep(5_000) }
        let timedOut = child.isRunning
        if timedOut { child.signal(SIGKILL) }
        let drained = ContinuousClock.now + .seconds(5)
        while !(output.isClosed && error.isClosed) || child.isRunning, ContinuousClock.now < drained { usleep(5_000) }
        return (child.ended?.shellStatus ?? -1, output.text, error.text, timedOut)
    }

    /// Reads a pipe to its end on a thread of its own.
    private static func drain(_ handle: FileHandle, into text: SharedText) {
        Thread.detachNewThread {
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                text.append(data)
            }
            text.close()
        }
    }

    var isRunning: Bool { process.isRunning }

    /// Whether the process ended by a signal's default action (``waitForExit(timeout:)`` then
    /// returns the signal's number).
    var endedBySignal: Bool {
        if case .killed = process.ended { return true }
        return false
    }

    /// The child's process ID.
    var processIdentifier: Int32 { process.pid }

    /// The IDs of this child's own children whose command line contains `argument` (read from
    /// `/proc`; Linux).
    func children(withArgument argument: String) -> [Int32] {
        let parent = process.pid
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let afterName = stat.range(of: ") ", options: .backwards)
            else { return false }
            // After "pid (name) " come the state and the parent's ID.
            let fields = stat[afterName.upperBound...].split(separator: " ")
            guard fields.count > 1, Int32(fields[1]) == parent,
                let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline")
            else { return false }
            return command.split(separator: 0).contains { String(decoding: $0, as: UTF8.self) == argument }
        }
    }

    /// Waits until `condition` holds for the lines of `stream`, failing after `timeout`. `untimed`:
    /// the lines without the time they begin with (``SharedText/untimedLines``: `phone --listen`).
    @discardableResult
    func waitForOutput(
        _ what: String,
        timeout: Duration = .seconds(20),
        in stream: KeyPath<ChildProcess, SharedText> = \.standardOutput,
        untimed: Bool = false,
        until condition: ([String]) -> Bool
    ) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        let read = { untimed ? self[keyPath: stream].untimedLines : self[keyPath: stream].lines }
        while true {
            let lines = read()
            if condition(lines) { return lines }
            if ContinuousClock.now >= deadline || (!process.isRunning && self[keyPath: stream].isClosed) {
                let finalLines = read()
                if condition(finalLines) { return finalLines }
                throw ChildProcessError(
                    "\(name): no \(what) within \(timeout) (running: \(process.isRunning))\n--- stdout:\n\(standardOutput.text)\n--- stderr:\n\(standardError.text)"
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Waits for the process to exit (and its output to be read), killing it after `timeout`.
    /// Returns the exit status; throws when it had to be killed.
    func waitForExit(timeout: Duration = .seconds(30)) async throws -> Int32 {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            if ContinuousClock.now >= deadline {
                terminate()
                throw ChildProcessError(
                    "\(name) did not exit within \(timeout) and was killed\n--- stdout:\n\(standardOutput.text)\n--- stderr:\n\(standardError.text)"
                )
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let drained = ContinuousClock.now + .seconds(5)
        while !(standardOutput.isClosed && standardError.isClosed), ContinuousClock.now < drained {
            try await Task.sleep(for: .milliseconds(10))
        }
        switch process.ended {
        case .exited(let status): return status
        case .killed(let signal): return signal
        case .unknown, nil: return -1
        }
    }

    /// Sends `number` (e.g. SIGINT) to the process.
    func signal(_ number: Int32) {
        process.signal(number)
    }

    /// SIGTERM, then SIGKILL if it is still running after 1 s. Idempotent.
    func terminate() {
        guard process.isRunning else { return }
        process.signal(SIGTERM)
        let deadline = Date().addingTimeInterval(1)
        while process.isRunning, Date() < deadline { usleep(10_000) }
        process.signal(SIGKILL)
    }

    /// Everything it printed, for failure messages.
    var transcript: String {
        "--- \(name) stdout:\n\(standardOutput.text)\n--- \(name) stderr:\n\(standardError.text)"
    }
}

extension ChildSpawn.Ending {
    /// As a shell reports it: the exit status, or 128 + the signal; -1 when unknown.
    var shellStatus: Int32 {
        switch self {
        case .exited(let code): return code
        case .killed(let signal): return 128 + signal
        case .unknown: return -1
        }
    }
}
