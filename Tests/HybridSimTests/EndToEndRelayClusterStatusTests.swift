import Foundation
import HybridFiles
import HybridTestSupport
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster status` (and its neighbours) in the states a walkthrough found it
/// misreporting: a stopped cluster, a dead nginx, a start in progress.
extension EndToEndRelayClusterTests {
    /// Starts one instance behind one nginx worker in `directory` on a free port; the caller stops it.
    static func startSmall(in directory: String, workers: Int = 1) throws {
        let (status, output) = try cluster(
            ["start", "--instances", "1", "--workers", "\(workers)", "--port", "\(try EndToEndLab.closedPort())", "--dir", directory])
        if status != 0 { _ = try? cluster(["stop", "--dir", directory]) }
        try #require(status == 0, "\(output)")
    }

    /// The pid in `directory`'s pid file `name`.
    static func pid(in directory: String, _ name: String) throws -> Int32 {
        try #require(Int32(try String(contentsOfFile: directory + "/" + name, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// A `flock(1)` holding `directory`'s lock, as another start, stop or restart would, once it has
    /// it (no fixed pause: a cold machine may take longer to start flock). `-o`: the command it runs
    /// (a long sleep) does not hold the lock too, so that ending flock frees it. End it with
    /// ``freeLock(_:in:)``.
    static func holdLock(in directory: String) throws -> ChildSpawn {
        let holder = try ChildSpawn(
            executable: "/usr/bin/flock", arguments: ["-o", directory + "/.lock", "sleep", "600"],
            environment: ProcessInfo.processInfo.environment, input: nil, output: nil, error: nil)
        try waitForLock(in: directory, held: true)
        return holder
    }

    /// Ends `holder` (SIGKILL: at once) and waits until the lock is free, so that a deferred `stop`
    /// does not find it held (3) and leave nginx running.
    static func freeLock(_ holder: ChildSpawn, in directory: String) throws {
        holder.signal(SIGKILL)
        try waitForLock(in: directory, held: false)
    }

    /// Waits up to 10 s until `directory`'s lock is held (`held`) or free.
    private static func waitForLock(in directory: String, held: Bool) throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let free = try ChildProcess.run("/usr/bin/flock", ["-n", directory + "/.lock", "true"]).status == 0
            if free != held { return }
            usleep(20_000)
        }
    }

    /// Waits up to 5 s for `pid` to be gone (not even a zombie).
    static func waitGone(_ pid: Int32) {
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

    @Test("status while a start, stop or restart holds the directory's lock: says it is in progress, gives no restart advice, exit 3")
    func statusDuringAnotherCommand() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try Self.startSmall(in: directory)
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        // What a restart (or a stop, its relays ended first) passes through: the relay gone, nginx up.
        let relay = try Self.pid(in: directory, "relay-0.pid")
        #expect(kill(relay, SIGKILL) == 0)
        Self.waitGone(relay)
        let (alone, aloneOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(alone == 1 && aloneOutput.contains("`relay-cluster restart 0 --dir \(directory)` starts it again"), "\(aloneOutput)")
        // The command holding the lock: flock(1) here.
        let holder = try Self.holdLock(in: directory)
        defer { holder.signal(SIGKILL) }
        let (busy, busyOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(busy == 3, "\(busyOutput)")
        // Named by its command line: flock(1) here (or sleep, which holds the file open too), not relay-cluster.
        #expect(busyOutput.contains("relay-cluster: a start, stop or restart (pid "), "\(busyOutput)")
        #expect(busyOutput.contains("is in progress in \(directory) (it holds \(directory)/.lock)"), "\(busyOutput)")
        #expect(!busyOutput.contains("relay-cluster restart"), "no advice while another command changes the cluster: \(busyOutput)")
        try Self.freeLock(holder, in: directory)
    }

    @Test("restart with nginx's master killed and its workers still routing: names the orphans, restarts nothing, and gives the stop and the exact start that fix it")
    func restartWithOrphanedWorkers() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let (started, startOutput) = try Self.cluster(
            ["start", "--instances", "1", "--workers", "2", "--addresses", "1", "--port", "\(port)", "--dir", directory, "--", "--max-tunnels", "50"])
        try #require(started == 0, "\(startOutput)")
        let relay = try Self.pid(in: directory, "relay-0.pid")
        let master = try Self.pid(in: directory, "nginx.pid")
        #expect(kill(master, SIGKILL) == 0)
        Self.waitGone(master)
        let (restarted, output) = try Self.cluster(["restart", "0", "--dir", directory])
        #expect(restarted == 1, "\(output)")
        #expect(output.contains("relay-cluster: nginx's master in \(directory) is gone, and its 2 orphaned workers (pids "), "\(output)")
        #expect(output.contains("still route the proxy's port"), "\(output)")
        #expect(output.contains("relay 0 is not restarted. `relay-cluster stop --dir \(directory)` ends them and the relays"), "\(output)")
        let again = "relay-cluster start --instances 1 --workers 2 --port \(port) --addresses 1 --dir \(directory) -- --max-tunnels 50"
        #expect(output.contains("then `\(again)` starts the cluster again"), "\(output)")
        #expect(kill(relay, 0) == 0, "the relay was left running: \(output)")
        // What it says works: the stop ends the orphans, the start takes the port again.
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 0 && stopOutput.contains("nginx worker (pid"), "\(stopOutput)")
        let (startedAgain, againOutput) = try Self.cluster(Array(again.split(separator: " ").dropFirst().map(String.init)))
        #expect(startedAgain == 0 && againOutput.contains("ready on ws://127.0.0.1:\(port)"), "\(againOutput)")
    }
}
