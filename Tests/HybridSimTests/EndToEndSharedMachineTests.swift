import Foundation
import HybridCore
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Another local user's files where an output that holds the QR secret was meant
/// (Docs/SHARED-MACHINE.md): a named pipe of theirs is refused before anything is written, and a
/// file of theirs in a sticky directory is refused with whose it is, not only "operation not
/// permitted". These need root (to give files away and to run the command as another user).
@Suite("End to end: another user's files in a shared directory", .serialized)
struct EndToEndSharedMachineTests {
    static let setpriv = "/usr/bin/setpriv"
    static let available = geteuid() == 0 && FileManager.default.isExecutableFile(atPath: setpriv)

    /// A sticky, world-writable directory like /tmp, removed by the caller.
    private static func stickyDirectory() throws -> String {
        let path = NSTemporaryDirectory() + "hybridsim-sticky-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try #require(chmod(path, 0o1777) == 0)
        return path
    }

    @Test("qr show --png onto a named pipe another user made, its reader waiting: refused (exit 1), the reader gets nothing", .enabled(if: available))
    func anotherUsersPipe() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = try Self.stickyDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pipe = directory + "/qr.png"
        try #require(mkfifo(pipe, 0o622) == 0 && chown(pipe, 4343, 4343) == 0)
        let reader = open(pipe, O_RDONLY | O_NONBLOCK)
        try #require(reader >= 0)
        defer { close(reader) }
        let url = ClientSession(requestType: .makeCredential, timestamp: 1).url
        let show = try lab.start("qr show", ["qr", "show", url, "--png", pipe])
        #expect(try await show.waitForExit() == 1, "\(show.transcript)")
        #expect(
            FailureOutput.singleErrorLine(show)
                == "error: could not write file: \(pipe): it is a named pipe owned by another user (uid 4343), who would read what is written; nothing was written",
            "\(show.transcript)")
        var byte: UInt8 = 0
        #expect(read(reader, &byte, 1) <= 0, "the image reached the other user's reader")
        #expect(!show.standardOutput.text.contains("FIDO:/"), "the code was printed after all: \(show.transcript)")
    }

    @Test("qr show --png, run as one user, onto another user's file in a sticky directory: refused with whose it is", .enabled(if: available))
    func anotherUsersFile() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = try Self.stickyDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/qr.png"
        try #require(FileManager.default.createFile(atPath: file, contents: Data("theirs".utf8)) && chown(file, 4343, 4343) == 0)
        let url = ClientSession(requestType: .makeCredential, timestamp: 1).url
        let show = try lab.startOther(
            "qr show as uid 4242",
            [Self.setpriv, "--reuid", "4242", "--regid", "4242", "--clear-groups", try HybridSimBinary.url().path, "qr", "show", url, "--png", file])
        #expect(try await show.waitForExit() == 1, "\(show.transcript)")
        #expect(
            FailureOutput.singleErrorLine(show)
                == "error: could not write file: \(file): it is a file of another user (uid 4343) in a sticky directory (such as /tmp), "
                + "which only they may replace; choose another name",
            "\(show.transcript)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "theirs")
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0 != "qr.png" }
        #expect(leftovers.isEmpty, "temporary files left: \(leftovers)")
    }
}
