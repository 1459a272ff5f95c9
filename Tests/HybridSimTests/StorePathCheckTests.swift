import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

/// Store paths the programs could never save to are refused at start, before any socket, not
/// after the user approved (Docs/STORES.md, "Location" and "Loading"). A directory this user cannot
/// write in: `EndToEndUnprivilegedTests` (root may write anywhere).
@Suite("Stores: paths checked before the ceremony")
struct StorePathCheckTests {
    @Test(
        "an empty store path, or one naming a directory, is a usage error (64) before any socket",
        arguments: [
            (["phone", "--qr", "FIDO:/1", "--store", ""], "--store needs a file name (--store DIR/passkeys.json"),
            (["phone", "--qr", "FIDO:/1", "--store", "newdir/"], "--store newdir/ names a directory, not the store file: give --store newdir/passkeys.json"),
            (["phone", "--qr", "FIDO:/1", "--store", "dir/.."], "--store dir/.. names a directory"),
            (["phone", "--listen", "--store", ""], "--store needs a file name"),
            (["phone", "--unlink", "--store", "x/"], "--store x/ names a directory"),
            (["desktop", "--request", "mc", "--rp-store", ""], "--rp-store needs a file name"),
            (["desktop", "--rp-store", "."], "--rp-store . names a directory, not the store file: give --rp-store ./rp-credentials.json"),
            (["desktop", "--link", "--links", ""], "--links needs a file name"),
            (["desktop", "--list-links", "--links", ""], "--links needs a file name"),
            (["desktop", "--forget", "all", "--links", "d/"], "--links d/ names a directory"),
            (["rp", "--profile", "hanko", "--store", ""], "--store needs a file name (--store DIR/rp-server-credentials.json"),
        ]
    )
    func namesNoFile(arguments: [String], mention: String) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let process = try lab.start(arguments[0], arguments)
        #expect(try await process.waitForExit(timeout: .seconds(15)) == ProgramFailure.usageExitCode, "\(process.transcript)")
        #expect(process.standardError.text.contains(mention), "\(process.transcript)")
    }

    @Test("a store written at an empty path or a directory's path is refused; nothing is made from the working directory")
    func atomicWriteNamesAFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let parent = (FileManager.default.currentDirectoryPath as NSString).deletingLastPathComponent
        let before = try FileManager.default.contentsOfDirectory(atPath: parent)
        let lockBefore = FileManager.default.fileExists(atPath: ".lock")
        for path in ["", directory.path + "/", directory.path + "/.."] {
            #expect {
                try PasskeyStore(path: path).save()
            } throws: { error in
                let error = error as? StoreError
                return error?.code == .writeFailed && error?.reason.hasSuffix("names no store file") == true
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: parent) == before, "no temporary file beside the working directory")
        #expect(FileManager.default.fileExists(atPath: ".lock") == lockBefore, "no lock file in the working directory")
        #expect(try directory.contents().isEmpty)
    }
}
