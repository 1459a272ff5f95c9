import Foundation
@testable import HybridFiles
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one writer of outputs that hold a secret (`qr show --png`, `desktop --qr-png`, `inspect --svg`,
/// `relay --record`): regular files replaced by 0600 ones, never through a symlink; pipes and
/// devices written to as they are; every refusal named.
@Suite("FileWriter: private outputs, pipes, refusals", .timeLimit(.minutes(1)))
struct FileWriterTests {
    /// A fresh directory, removed after `body`.
    private func withDirectory(_ body: (String) async throws -> Void) async throws {
        let path = NSTemporaryDirectory() + "hybridsim-files-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await body(path)
    }

    private func mode(_ path: String) throws -> Int? {
        try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
    }

    @Test("a regular file is replaced by a 0600 one, whatever its mode and the umask; no temporary is left")
    func regularFile() async throws {
        try await withDirectory { directory in
            let path = directory + "/qr.png"
            #expect(FileManager.default.createFile(atPath: path, contents: Data("old".utf8), attributes: [.posixPermissions: 0o644]))
            let previous = umask(0o277)  // a umask that would leave the owner read-only
            defer { umask(previous) }
            try FileWriter.replacePrivately(path, with: [9, 8, 7])
            #expect(FileManager.default.contents(atPath: path) == Data([9, 8, 7]))
            #expect(try mode(path) == 0o600)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["qr.png"])
            try FileWriter.replacePrivately(directory + "/new.svg", with: [1])
            #expect(try mode(directory + "/new.svg") == 0o600)
        }
    }

    @Test("a symbolic link planted at the path is replaced, not followed")
    func plantedLink() async throws {
        try await withDirectory { directory in
            let victim = directory + "/victim.txt"
            try Data("do not touch".utf8).write(to: URL(fileURLWithPath: victim))
            try FileManager.default.createSymbolicLink(atPath: directory + "/qr.png", withDestinationPath: victim)
            try FileWriter.replacePrivately(directory + "/qr.png", with: [1, 2])
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "do not touch")
            #expect(try FileManager.default.attributesOfItem(atPath: directory + "/qr.png")[.type] as? FileAttributeType == .typeRegular)
        }
    }

    @Test("a path that names one of this process's descriptors (/dev/stdout redirected to a file, /dev/fd/N, a link to /proc/self/fd/N) is written through it; the link is left a link")
    func ownDescriptor() async throws {
        try await withDirectory { directory in
            // The shape of `--svg /dev/stdout > out.svg`: a link (as /dev/stdout is) to this
            // process's descriptor, which leads to a regular file the shell opened.
            let output = directory + "/out.svg"
            let fd = open(output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            #expect(fd >= 0)
            defer { close(fd) }
            let link = directory + "/stdout"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/proc/self/fd/\(fd)")
            #expect(FileWriter.ownDescriptor(link) == fd)
            #expect(FileWriter.ownDescriptor("/dev/fd/\(fd)") == fd)
            #expect(FileWriter.ownDescriptor("/dev/stdout") == 1)
            #expect(FileWriter.ownDescriptor(output) == nil)
            // Where `inspect --svg` would write into standard output's file: by name, or the same file.
            #expect(FileWriter.names(link, descriptor: fd) && FileWriter.names(output, descriptor: fd))
            #expect(FileWriter.names("/dev/fd/\(fd)", descriptor: fd) && FileWriter.names("/dev/stdout", descriptor: 1))
            #expect(!FileWriter.names(directory, descriptor: fd) && !FileWriter.names(directory + "/none", descriptor: fd))
            // A socket (as SwiftNIO's are) or a descriptor not open is not a stream to write into.
            var pair: [Int32] = [0, 0]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
            defer { close(pair[0]); close(pair[1]) }
            #expect(FileWriter.ownDescriptor("/dev/fd/\(pair[0])") == nil)
            #expect(FileWriter.ownDescriptor("/proc/self/fd/987654") == nil)
            try FileWriter.replacePrivately(link, with: Array("first ".utf8))
            try FileWriter.replacePrivately("/dev/fd/\(fd)", with: Array("second".utf8))
            #expect(try String(contentsOfFile: output, encoding: .utf8) == "first second", "written where the stream is, in order")
            #expect(try FileManager.default.attributesOfItem(atPath: link)[.type] as? FileAttributeType == .typeSymbolicLink)
            #expect(try mode(output) == 0o644, "the shell's file keeps its mode")
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == ["out.svg", "stdout"], "no temporary")
        }
    }

    @Test("a directory, a missing directory and a file in place of a directory are refused by name")
    func refusals() async throws {
        try await withDirectory { directory in
            #expect(throws: FileFailure.directory) { try FileWriter.replacePrivately(directory, with: [1]) }
            #expect(throws: FileFailure.directory) { try FileWriter.replacePrivately(directory + "/", with: [1]) }
            #expect(throws: FileFailure.noDirectory(directory + "/missing")) {
                try FileWriter.replacePrivately(directory + "/missing/qr.png", with: [1])
            }
            #expect(FileFailure.noDirectory("/x").description == "the directory /x does not exist")
            #expect(FileManager.default.createFile(atPath: directory + "/file", contents: nil))
            #expect(throws: FileFailure.system(ENOTDIR)) { try FileWriter.replacePrivately(directory + "/file/qr.png", with: [1]) }
            let entries = try FileManager.default.contentsOfDirectory(atPath: directory)
            #expect(entries == ["file"], "nothing created")
        }
    }

    @Test("a named pipe is written to as it is (mode kept, nothing renamed over it); with no reader it fails at once")
    func namedPipe() async throws {
        try await withDirectory { directory in
            let pipe = directory + "/qr.fifo"
            try #require(mkfifo(pipe, 0o644) == 0)
            let start = ContinuousClock.now
            #expect(throws: FileFailure.noReader) { try FileWriter.replacePrivately(pipe, with: [1, 2, 3]) }
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(FileFailure.noReader.description == "a named pipe nobody reads")

            let received = Task.detached { () -> [UInt8] in
                let fd = open(pipe, O_RDONLY)
                guard fd >= 0 else { return [] }
                defer { close(fd) }
                return (try? FileReader.readToEnd(fd, maximumSize: 16)) ?? []
            }
            var written = false
            for _ in 0..<200 where !written {
                do {
                    try FileWriter.replacePrivately(pipe, with: [1, 2, 3])
                    written = true
                } catch {
                    try await Task.sleep(for: .milliseconds(10))  // until the reader has the pipe open
                }
            }
            #expect(written)
            #expect(await received.value == [1, 2, 3])
            #expect(try FileManager.default.attributesOfItem(atPath: pipe)[.type] as? FileAttributeType != .typeRegular)
            #expect(try mode(pipe) == 0o644)
        }
    }

    @Test("a named pipe another user owns (planted in a shared directory) is refused with its reader waiting; root's /dev/null is written")
    func anotherUsersPipe() async throws {
        try await withDirectory { directory in
            try FileWriter.replacePrivately("/dev/null", with: [1, 2, 3])
            // Only root can give a pipe to another user; elsewhere the premise cannot be set up.
            guard geteuid() == 0 else { return }
            let pipe = directory + "/qr.png"
            try #require(mkfifo(pipe, 0o622) == 0 && chown(pipe, 4242, 4242) == 0)
            let reader = open(pipe, O_RDONLY | O_NONBLOCK)
            try #require(reader >= 0)
            defer { close(reader) }
            #expect(throws: FileFailure.foreignOwner(kind: "named pipe", uid: 4242)) {
                try FileWriter.replacePrivately(pipe, with: [1, 2, 3])
            }
            var byte: UInt8 = 0
            #expect(read(reader, &byte, 1) <= 0, "the secret reached the other user's reader")
            #expect(FileFailure.foreignOwner(kind: "named pipe", uid: 4242).description
                == "it is a named pipe owned by another user (uid 4242), who would read what is written; nothing was written")
            // Through a symbolic link too: the object opened is checked, not the link.
            let link = directory + "/link.png"
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: pipe)
            #expect(throws: FileFailure.foreignOwner(kind: "named pipe", uid: 4242)) {
                try FileWriter.replacePrivately(link, with: [1, 2, 3])
            }
        }
    }

    @Test("writeAll reports the write's errno; openForWriting gives a blocking descriptor unless asked")
    func writeAllAndOpen() async throws {
        try await withDirectory { directory in
            let path = directory + "/out"
            let readOnly = open(directory, O_RDONLY)
            defer { close(readOnly) }
            #expect(throws: FileFailure.system(EBADF)) { try FileWriter.writeAll([1], to: readOnly) }
            #expect(throws: FileFailure.system(EBADF)) { try FileWriter.writeAll([1], to: -1) }
            try FileWriter.writeAll([], to: -1)  // nothing to write, nothing written

            let fd = try FileWriter.openForWriting(path, flags: O_WRONLY | O_CREAT)
            #expect(fcntl(fd, F_GETFL) & O_NONBLOCK == 0)
            try FileWriter.writeAll(Array(repeating: 7, count: 200_000), to: fd)
            close(fd)
            #expect(FileManager.default.contents(atPath: path)?.count == 200_000)
            let nonBlocking = try FileWriter.openForWriting(path, flags: O_WRONLY, blocking: false)
            #expect(fcntl(nonBlocking, F_GETFL) & O_NONBLOCK != 0)
            close(nonBlocking)
            #expect(throws: FileFailure.system(ENOENT)) { _ = try FileWriter.openForWriting(directory + "/no/such", flags: O_WRONLY) }
        }
    }

    @Test("split: directory and name of a path")
    func split() {
        #expect(FileWriter.split("qr.png") == (".", "qr.png"))
        #expect(FileWriter.split("/qr.png") == ("/", "qr.png"))
        #expect(FileWriter.split("a/b/qr.png") == ("a/b", "qr.png"))
    }
}
