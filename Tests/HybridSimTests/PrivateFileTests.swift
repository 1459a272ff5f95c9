import Foundation
@testable import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `desktop --qr-png`'s writer: a regular file is replaced with a 0600 one (never through a symlink),
/// a pipe or device is written to as it is.
@Suite("Private files (--qr-png): files, pipes and devices", .timeLimit(.minutes(1)))
struct PrivateFileTests {
    @Test("a named pipe is written to as it is (mode untouched, nothing renamed over it); with no reader it fails at once")
    func namedPipe() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let pipe = directory.file("qr.fifo")
        try #require(mkfifo(pipe, 0o644) == 0)
        let start = ContinuousClock.now
        #expect(throws: PrivateFile.Failure.self) { try PrivateFile.write([1, 2, 3], to: pipe) }
        do {
            try PrivateFile.write([1, 2, 3], to: pipe)
        } catch {
            #expect(error.description == "\(pipe): a named pipe nobody reads")
        }
        #expect(ContinuousClock.now - start < .seconds(2))

        let received = Task.detached { () -> [UInt8] in
            let fd = open(pipe, O_RDONLY)
            guard fd >= 0 else { return [] }
            defer { close(fd) }
            var bytes = [UInt8](repeating: 0, count: 16)
            let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            return Array(bytes.prefix(max(0, count)))
        }
        var written = false
        for _ in 0..<200 where !written {
            do {
                try PrivateFile.write([1, 2, 3], to: pipe)
                written = true
            } catch {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        #expect(written)
        #expect(await received.value == [1, 2, 3])
        let attributes = try FileManager.default.attributesOfItem(atPath: pipe)
        #expect(attributes[.type] as? FileAttributeType != .typeRegular, "still the pipe, not a file renamed over it")
        #expect(attributes[.posixPermissions] as? Int == 0o644)
    }

    @Test("a regular file is replaced by a 0600 one")
    func regularFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("qr.png")
        #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8), attributes: [.posixPermissions: 0o644]))
        try PrivateFile.write([9, 8, 7], to: path)
        #expect(FileManager.default.contents(atPath: path) == Data([9, 8, 7]))
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
    }
}

/// `--keylog FILE`: a regular file is made private, a pipe or device is used as it is.
@Suite("Key log files: files, pipes and devices", .timeLimit(.minutes(1)))
struct KeyLogFileTests {
    @Test("a regular key log is made 0600; a named pipe keeps its mode, and one with no reader is refused at once")
    func modes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.file("keys.log")
        #expect(FileManager.default.createFile(atPath: file, contents: nil, attributes: [.posixPermissions: 0o644]))
        _ = try KeyLogFile(path: file)
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)

        let pipe = directory.file("keys.fifo")
        try #require(mkfifo(pipe, 0o644) == 0)
        #expect(throws: ProgramFailure.self) { _ = try KeyLogFile(path: pipe) }
        do {
            _ = try KeyLogFile(path: pipe)
        } catch {
            #expect(error.message == "--keylog \(pipe): cannot open for appending (a named pipe nobody reads)")
        }
        let reader = open(pipe, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        _ = try KeyLogFile(path: pipe)
        #expect(try FileManager.default.attributesOfItem(atPath: pipe)[.posixPermissions] as? Int == 0o644, "not the key log's to change")
    }
}
