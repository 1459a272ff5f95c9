import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster status` (and its neighbours) in the states a walkthrough found it
/// misreporting: a stopped cluster, a dead nginx, a start in progress.
extension EndToEndRelayClusterTests {
    /// Starts one instance behind one nginx worker in `directory` on a free port; the caller stops it.
    fileprivate static func startSmall(in directory: String, workers: Int = 1) throws {
        let (status, output) = try cluster(
            ["start", "--instances", "1", "--workers", "\(workers)", "--port", "\(try EndToEndLab.closedPort())", "--dir", directory])
        if status != 0 { _ = try? cluster(["stop", "--dir", directory]) }
        try #require(status == 0, "\(output)")
    }

    /// The pid in `directory`'s pid file `name`.
    fileprivate static func pid(in directory: String, _ name: String) throws -> Int32 {
        try #require(Int32(try String(contentsOfFile: directory + "/" + name, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// Waits up to 5 s for `pid` to be gone (not even a zombie).
    fileprivate static func waitGone(_ pid: Int32) {
        let deadline = ContinuousClock.now + .seconds(5)
        while kill(pid, 0) == 0, ContinuousClock.now < deadline { usleep(20_000) }
    }

    @Test("status after a clean stop: not running, exit 2 (it exited 1, as for a running cluster with a part down)")
    func statusAfterStop() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try Self.startSmall(in: directory)
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        try #require(stopped == 0, "\(stopOutput)")
        let (status, output) = try Self.cluster(["status", "--dir", directory])
        #expect(status == 2, "\(output)")
        #expect(output.contains("relay-cluster: not running: nothing of the cluster in \(directory) runs"), "\(output)")
    }

    @Test("nginx killed (master and workers): status names its pid file, the pid, and that the process is gone (it said 'not this cluster's nginx')")
    func statusOfADeadNginx() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try Self.startSmall(in: directory)
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let master = try Self.pid(in: directory, "nginx.pid")
        // nginx's master leads its own process group, its workers in it: the whole proxy at once.
        #expect(kill(-master, SIGKILL) == 0)
        Self.waitGone(master)
        let (status, output) = try Self.cluster(["status", "--dir", directory])
        #expect(status == 1, "the relay still runs, the proxy is down: \(output)")
        #expect(output.contains(
            "nginx: not running: the proxy is down (\(directory)/nginx.pid names pid \(master), which is gone: nginx exited or was killed; see \(directory)/nginx-error.log)"),
            "\(output)")
    }
}
