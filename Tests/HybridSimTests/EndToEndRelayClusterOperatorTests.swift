import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster` as an operator meets it when something is off: a binary older than the
/// script, a pid file that names another program.
extension EndToEndRelayClusterTests {
    @Test("a hybrid-sim older than the script (its relay has no --contacts): start says so and exits 1 before starting anything")
    func oldBinaryRefused() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let old = lab.file("hybrid-sim")
        try "#!/bin/sh\necho 'USAGE: hybrid-sim relay [--port <port>]'\n".write(toFile: old, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: old)
        let directory = lab.file("cluster")
        let (status, output) = try Self.cluster(
            ["start", "--instances", "1", "--port", "\(try EndToEndLab.closedPort())", "--dir", directory], binary: old)
        #expect(status == 1 && output.contains("is older than this script (its relay has no --contacts)"), "\(output)")
        #expect(!output.contains("relay 0"), "nothing started: \(output)")
        // One whose --help fails (another program, a binary for another machine) is said to be that.
        let broken = lab.file("broken-hybrid-sim")
        try "#!/bin/sh\necho 'cannot execute binary file' >&2\nexit 126\n".write(toFile: broken, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: broken)
        let (failed, failedOutput) = try Self.cluster(
            ["start", "--instances", "1", "--port", "\(try EndToEndLab.closedPort())", "--dir", lab.file("cluster-2")], binary: broken)
        #expect(failed == 1 && failedOutput.contains("relay --help failed (is it a hybrid-sim binary for this machine?): cannot execute binary file"),
                "\(failedOutput)")
    }

    @Test("status names a pid file whose pid is now another program's (not 'gone'), and exits 1: a part of the cluster is down")
    func statusOfAStalePidFile() throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // This test process: alive, and not a relay of the cluster.
        try "\(getpid())\n".write(toFile: directory + "/relay-0.pid", atomically: true, encoding: .utf8)
        let (status, output) = try Self.cluster(["status", "--dir", directory])
        #expect(status == 1, "\(output)")
        #expect(output.contains("relay-0: not running (pid \(getpid()) is another program now, not this cluster's relay"), "\(output)")
    }
}
