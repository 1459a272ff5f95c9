import Foundation
import HybridCore
@testable import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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

    @Test("a key log that is a symbolic link to a regular file is refused (it could send the keys into someone's file); a link to a device is used")
    func symbolicLinks() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let victim = directory.file("victim")
        #expect(FileManager.default.createFile(atPath: victim, contents: Data("hi\n".utf8), attributes: [.posixPermissions: 0o644]))
        let link = directory.file("keys.log")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
        let error = #expect(throws: ProgramFailure.self) { _ = try KeyLogFile(path: link) }
        #expect(error?.message == "--keylog \(link) is a symbolic link to a regular file: give the file itself (the stores refuse links too)")
        #expect(try FileManager.default.attributesOfItem(atPath: victim)[.posixPermissions] as? Int == 0o644, "the target's mode is left")

        let keys = SessionKeys(
            initiatorEphemeral: [4] + Array(repeating: 1, count: 64), handshakeHash: Array(repeating: 2, count: 32),
            initiatorToResponder: Array(repeating: 3, count: 32), responderToInitiator: Array(repeating: 4, count: 32))
        // A link to a device is used as it is (as /dev/stderr is).
        let device = directory.file("null.log")
        try FileManager.default.createSymbolicLink(atPath: device, withDestinationPath: "/dev/null")
        try KeyLogFile(path: device).hook(keys)

        // A link to one of this process's descriptors (`--keylog /dev/stderr` with stderr redirected
        // to a file): the user's own stream, used, and its mode left.
        let redirected = directory.file("stderr.txt")
        // Opened as `2> file` opens it (O_TRUNC, no O_APPEND): a line written through a reopened
        // path was overwritten by the stream's next write.
        let stream = open(redirected, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        try #require(stream >= 0)
        defer { close(stream) }
        let ownLink = directory.file("stderr")
        try FileManager.default.createSymbolicLink(atPath: ownLink, withDestinationPath: "/proc/self/fd/\(stream)")
        try KeyLogFile(path: ownLink).hook(keys)
        _ = "a later line\n".withCString { write(stream, $0, strlen($0)) }
        #expect(try String(contentsOfFile: redirected, encoding: .utf8) == keys.keyLogLine + "\na later line\n")
        #expect(try FileManager.default.attributesOfItem(atPath: redirected)[.posixPermissions] as? Int == 0o644)

        // The file checked at start replaced by a link to someone's file before a line is appended:
        // the line is not written through it.
        let file = directory.file("later.log")
        let hook = try KeyLogFile(path: file).hook
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: victim)
        hook(keys)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "hi\n", "the key line went through the link")
    }

    @Test("a dangling link planted at the key log's path makes no file where it points; another user's named pipe is refused")
    func plantedByAnotherUser() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // A link to a file that does not exist yet: refused, and nothing is created at its target
        // (before, the open created an empty 0600 file wherever the link pointed).
        let target = directory.file("chosen-by-someone")
        let link = directory.file("keys.log")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        let error = #expect(throws: ProgramFailure.self) { _ = try KeyLogFile(path: link) }
        #expect(error?.message == "--keylog \(link): cannot open for appending (no such file or directory)")
        #expect(!FileManager.default.fileExists(atPath: target), "a file was created through the link")

        // A named pipe owned by another user, with its reader waiting: refused before a line is
        // written. Only root can give a pipe away; elsewhere the premise cannot be set up.
        guard geteuid() == 0 else { return }
        let pipe = directory.file("keys.fifo")
        try #require(mkfifo(pipe, 0o622) == 0 && chown(pipe, 4242, 4242) == 0)
        let reader = open(pipe, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        let refusal = #expect(throws: ProgramFailure.self) { _ = try KeyLogFile(path: pipe) }
        #expect(refusal?.message == "--keylog \(pipe): it is a named pipe owned by another user (uid 4242), who would read what is written; nothing was written")
        // Ours again: accepted (the check is the owner, not the kind).
        try #require(chown(pipe, 0, 0) == 0)
        _ = try KeyLogFile(path: pipe)
    }

    @Test("a link to a device, accepted at start, swapped for a link to a file of this user's: no line goes there")
    func linkSwappedAfterStart() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let link = directory.file("keys.log")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/null")
        let hook = try KeyLogFile(path: link).hook
        // This user's own file, which others may read: the owner check alone would let it through.
        let readable = directory.file("notes.txt")
        #expect(FileManager.default.createFile(atPath: readable, contents: Data("mine\n".utf8), attributes: [.posixPermissions: 0o644]))
        try FileManager.default.removeItem(atPath: link)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: readable)
        hook(SessionKeys(
            initiatorEphemeral: [4] + Array(repeating: 1, count: 64), handshakeHash: Array(repeating: 2, count: 32),
            initiatorToResponder: Array(repeating: 3, count: 32), responderToInitiator: Array(repeating: 4, count: 32)))
        #expect(try String(contentsOfFile: readable, encoding: .utf8) == "mine\n", "the keys went through the swapped link")
    }

    /// The reader of a key-log pipe leaves after the check at start: the ceremony goes on, the
    /// desktop warns on stderr that the line could not be appended, and nothing blocks.
    @Test("a key-log pipe whose reader left: a note on stderr, the sign-in still succeeds", .timeLimit(.minutes(1)))
    func readerLeft() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let pipe = lab.file("keys.fifo")
        try #require(mkfifo(pipe, 0o600) == 0)
        let reader = open(pipe, O_RDONLY | O_NONBLOCK | O_CLOEXEC)  // no child may keep a reader
        try #require(reader >= 0)
        let desktop = try await lab.startDesktop(["--request", "mc", "--keylog", pipe])
        close(reader)  // the desktop checked the pipe at start; its reader goes before the handshake
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        #expect(
            desktop.process.standardError.lines.contains {
                $0.hasPrefix("note: could not append to the key log \(pipe) (") && $0.hasSuffix("); this session's keys are not recorded")
            },
            "\(desktop.process.transcript)")
    }
}
