import Foundation
import HybridFiles
import HybridTestSupport
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster stop` where it was too quiet or too bold: a directory that is not a
/// cluster's, a relay that had to be killed.
extension EndToEndRelayClusterTests {
    @Test("stop and restart on a directory that is not a cluster's: refused (stop 64, restart 1), nothing written there (stop wrote .lock); an empty one has nothing to stop")
    func stopRefusesAForeignDirectory() throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("documents")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "mine\n".write(toFile: directory + "/notes.txt", atomically: true, encoding: .utf8)
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 64, "\(stopOutput)")
        #expect(stopOutput.contains("relay-cluster: \(directory) is not a relay-cluster directory"), "\(stopOutput)")
        #expect(stopOutput.contains("nothing stopped, nothing written there"), "\(stopOutput)")
        let (restarted, restartOutput) = try Self.cluster(["restart", "0", "--dir", directory])
        #expect(restarted == 1 && restartOutput.contains("no cluster recorded in \(directory)"), "\(restartOutput)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["notes.txt"], "the directory was written to")

        let empty = lab.file("empty")
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: true)
        let (emptyStopped, emptyOutput) = try Self.cluster(["stop", "--dir", empty])
        #expect(emptyStopped == 0 && emptyOutput.contains("relay-cluster: nothing to stop (\(empty) is empty)"), "\(emptyOutput)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: empty).isEmpty, "the directory was written to")
    }

    @Test("stop with a relay frozen by SIGSTOP: it is killed, and stop says it could not save its contacts and exits 1 (it exited 0)")
    func stopReportsAKilledRelay() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try Self.startSmall(in: directory)
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let relay = try Self.pid(in: directory, "relay-0.pid")
        #expect(kill(relay, SIGSTOP) == 0)
        let (stopped, output) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 1, "\(output)")
        #expect(output.contains("relay-cluster: relay-0 (pid \(relay)) did not end on SIGTERM (frozen by SIGSTOP or a debugger, or stuck) and was killed: it could not save its contact file (\(directory)/contacts-0.json keeps what it saved before"),
                "\(output)")
        #expect(output.contains("relay-0 (pid \(relay), killed)") && output.contains("nginx (pid"), "everything stopped all the same: \(output)")
        #expect(kill(relay, 0) != 0, "the relay still runs: \(output)")
    }
}
