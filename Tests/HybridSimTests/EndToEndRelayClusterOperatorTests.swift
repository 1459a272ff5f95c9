import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster` as an operator meets it when something is off: a binary older than the
/// script, a pid file that names another program, a relay frozen by SIGSTOP, a full disk.
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

    @Test("status names a pid file whose pid is now another program's (not 'gone'), and exits 1: nothing of the cluster runs but its pid file remains, so it ended without a stop")
    func statusOfAStalePidFile() throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // This test process: alive, and not a relay of the cluster.
        try "\(getpid())\n".write(toFile: directory + "/relay-0.pid", atomically: true, encoding: .utf8)
        let (status, output) = try Self.cluster(["status", "--dir", directory])
        // A pid file left behind: the cluster ended without a stop, which is down (1), not stopped (2).
        #expect(status == 1, "\(output)")
        #expect(output.contains("relay-0: not running (pid \(getpid()) is another program now, not this cluster's relay"), "\(output)")
        #expect(output.contains("relay-cluster: down: nothing of the cluster in \(directory) runs, but its pid files remain (relay-0.pid)"), "\(output)")
    }

    @Test("a relay frozen by SIGSTOP: status says it is stopped and how to resume it, exit 1 (it said all was well); after SIGCONT, 0")
    func statusOfAFrozenRelay() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try Self.startSmall(in: directory)
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let pid = try Self.pid(in: directory, "relay-0.pid")
        let (healthy, healthyOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(healthy == 0, "\(healthyOutput)")
        kill(pid, SIGSTOP)
        let (frozen, frozenOutput) = try Self.cluster(["status", "--dir", directory])
        kill(pid, SIGCONT)
        #expect(frozen == 1, "\(frozenOutput)")
        #expect(frozenOutput.contains("stopped (SIGSTOP or a debugger): its clients wait until their timeouts; `kill -CONT \(pid)` resumes it"),
                "\(frozenOutput)")
        let (resumed, resumedOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(resumed == 0, "\(resumedOutput)")
    }

    @Test("the cluster's directory on a full filesystem: status and stop say the contact files and errors would be lost, exit 1 (stop exited 0)",
          .enabled(if: FullFileSystem.available))
    func fullDisk() throws {
        guard Self.nginxInstalled() else { return }
        let disk = try FullFileSystem(kilobytes: 512)
        defer { disk.tearDown() }
        let directory = disk.path + "/cluster"
        try Self.startSmall(in: directory)
        var stopped = false
        defer { if !stopped { _ = try? Self.cluster(["stop", "--dir", directory]) } }
        // What is left is too little for a contact file's save (and for the relay's error about it).
        disk.fill()
        let (status, statusOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(status == 1, "\(statusOutput)")
        #expect(statusOutput.contains("(its filesystem is full): the relays cannot save their contact files there, nor write their errors to relay-I.err"),
                "\(statusOutput)")
        let (stop, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        stopped = true
        #expect(stop == 1, "\(stopOutput)")
        #expect(stopOutput.contains("relay-cluster: the relays stopped with \(directory) full:"), "\(stopOutput)")
        #expect(stopOutput.contains("stopped"), "the relays and nginx were stopped all the same: \(stopOutput)")
    }
}
