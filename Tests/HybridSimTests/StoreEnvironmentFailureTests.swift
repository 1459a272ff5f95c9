import Crypto
import Foundation
import HybridCore
@testable import HybridSim
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A store the machine fails (a full disk, the open-file limit, an I/O error) is a runtime failure,
/// exit 1, with the same message; a store whose content or path is wrong stays bad input, exit 2
/// (Docs/CLI.md, "Exit status"; Docs/STORES.md).
@Suite("Stores: the machine's failures are exit 1, the file's are exit 2", .serialized)
struct StoreEnvironmentFailureTests {
    @Test("the errno decides: ENOSPC, EDQUOT, EMFILE, ENFILE, EIO and ENOMEM are the machine's (failed), EACCES, EROFS, ELOOP and none the input's")
    func classification() {
        for code in [ENOSPC, EDQUOT, EMFILE, ENFILE, EIO, ENOMEM] {
            let error = StoreError(.writeFailed, path: "/s.json", "x", systemError: code)
            #expect(error.isEnvironmentFailure && error.failureKind == .failed, "\(code)")
            #expect(ProgramFailure.from(error, relayURL: "ws://127.0.0.1:1").exitCode == 1, "\(code)")
        }
        for code in [EACCES, EROFS, ELOOP] {
            #expect(StoreError(.unreadable, path: "/s.json", "x", systemError: code).failureKind == .badInput, "\(code)")
        }
        let content = StoreError(.notJSON, path: "/s.json", "x")
        #expect(content.failureKind == .badInput && ProgramFailure.from(content, relayURL: "ws://127.0.0.1:1").exitCode == 2)
    }

    @Test("the errno travels with the error: a directory fsync that fails with EIO is the machine's")
    func errnoKept() throws {
        let directory = NSTemporaryDirectory() + "hybridsim-eio-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let error = #expect(throws: StoreError.self) {
            try AtomicFileFaults.write([1], to: directory + "/s.json", directorySyncErrno: EIO)
        }
        #expect(error?.systemError == EIO && error?.failureKind == .failed, "\(String(describing: error))")
    }

    @Test("desktop --forget on a full disk: exit 1 (was 2, bad input) with the system's words, the links file left as it was", .enabled(if: FullFileSystem.available))
    func forgetOnFullDisk() throws {
        let disk = try FullFileSystem()
        defer { disk.tearDown() }
        let path = disk.path + "/links.json"
        let info = LinkingInfo(
            contactID: [1], pairingID: Array(1...8), linkSecret: Array(repeating: 1, count: 32),
            authenticatorPublicKey: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation), name: "Pixel",
            handshakeSignature: Array(repeating: 0, count: 32))
        try LinkStore(path: path, links: [StoredLink(info, tunnelDomain: 0, linkedAt: 5)]).save()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        disk.fill()
        let lines = Mutex<[String]>([])
        let output = ProgramOutput(standardOutput: { _ in }, standardError: { line in lines.withLock { $0.append(line) } })
        let status = DesktopLinksProgram.forget("Pixel", path: path, json: false, output: output)
        let said = lines.withLock { $0 }
        #expect(status == 1, "\(said)")
        #expect(said.last?.hasPrefix("error: cannot use the links file: \(path): cannot write the store: ") == true, "\(said)")
        #expect(said.last?.lowercased().hasSuffix("no space left on device") == true, "\(said)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test("phone --listen whose link identity cannot be saved on a full disk: exit 1 (was 2), one error line with the system's words", .enabled(if: FullFileSystem.available))
    func listenOnFullDisk() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let disk = try FullFileSystem()
        defer { disk.tearDown() }
        disk.fill()
        let relay = "ws://127.0.0.1:\(try EndToEndLab.closedPort())"
        let phone = try lab.start(
            "phone --listen", ["phone", "--listen", "--store", disk.path + "/passkeys.json", "--relay", relay, "--listen-timeout", "2"])
        #expect(try await phone.waitForExit() == 1, "\(phone.transcript)")
        let line = FailureOutput.singleErrorLine(phone)
        #expect(line.hasPrefix("error: \(disk.path)/phone-link.json: cannot write the store: ") && line.lowercased().hasSuffix("no space left on device"), "\(line)")
    }

    @Test("relay --contacts on a disk with no file left (its lock file cannot be made): exit 1 (was 2); a damaged file stays 2", .enabled(if: FullFileSystem.available))
    func relayContactsOnFullDisk() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let disk = try FullFileSystem(inodes: 64)
        defer { disk.tearDown() }
        try Data("{oops".utf8).write(to: URL(fileURLWithPath: disk.path + "/damaged.json"))
        disk.fillInodes()
        let file = disk.path + "/contacts.json"
        let relay = try lab.start("relay --contacts", ["relay", "--port", "0", "--contacts", file])
        #expect(try await relay.waitForExit() == 1, "\(relay.transcript)")
        let line = FailureOutput.singleErrorLine(relay)
        #expect(line.hasPrefix("error: --contacts: \(file): cannot read the store: cannot open the lock file \(file).lock: "), "\(line)")
        #expect(line.lowercased().hasSuffix("no space left on device"), "\(line)")
        disk.free()
        let damaged = try lab.start("relay --contacts damaged", ["relay", "--port", "0", "--contacts", disk.path + "/damaged.json"])
        #expect(try await damaged.waitForExit() == 2, "\(damaged.transcript)")
    }
}
