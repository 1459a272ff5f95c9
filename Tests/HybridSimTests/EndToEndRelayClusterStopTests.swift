import Foundation
import HybridFiles
import HybridTestSupport
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `Scripts/relay-cluster stop` where it was too quiet or too bold (a directory that is not a
/// cluster's, a relay that had to be killed), and nginx's log while an instance is down.
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

    @Test("an instance down: nginx's log keeps the first failed request of a kind and counts the rest, said when nginx stops (it had a line for each: one a second per phone homed there)")
    func nginxLogThrottled() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        var stopped = false
        defer { if !stopped { _ = try? Self.cluster(["stop", "--dir", directory]) } }
        let (started, startOutput) = try Self.cluster(
            ["start", "--instances", "1", "--workers", "1", "--addresses", "1", "--port", "\(port)", "--dir", directory])
        try #require(started == 0, "\(startOutput)")
        let relay = try Self.pid(in: directory, "relay-0.pid")
        #expect(kill(relay, SIGKILL) == 0)
        Self.waitGone(relay)
        // 20 phones' listen requests, each contact ID homed on the dead instance: 502 from nginx.
        let contactID = "ABCDEFGHIJKLMNOPQRSTUV"
        for _ in 0..<20 {
            let answer = LoopbackSocket.exchange(
                port: port, "GET /cable/listen/\(contactID) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            #expect(answer?.status == 502, "\(answer?.response ?? "no connection")")
        }
        let log = directory + "/nginx-error.log"
        func failures() -> Int {
            let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            return text.components(separatedBy: "connect() failed (111: Connection refused) while connecting to upstream, client:").count - 1
        }
        let deadline = ContinuousClock.now + .seconds(5)
        while failures() == 0, ContinuousClock.now < deadline { usleep(20_000) }
        usleep(300_000)  // what else the filter would write
        #expect(failures() == 1, "the first failure, once: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        let (stop, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        stopped = true
        #expect(stop == 0, "\(stopOutput)")
        let text = try String(contentsOfFile: log, encoding: .utf8)
        #expect(text.contains("[notice] relay-cluster: 19 more lines like the one at "), "\(text)")
        #expect(text.contains("connect() failed (111: Connection refused) while connecting to upstream, upstream http://127.0.0.1:"), "\(text)")
        #expect(text.contains("/cable/listen/ABCD…") && !text.contains(contactID), "the contact ID cut, as before: \(text)")
    }
}

extension EndToEndRelayClusterTests {
    @Test("the nginx log filter ended by SIGTERM (as stop ends one that outlives nginx) still writes the count it held back")
    func logFilterCountsOnSignal() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let input = try #require(ChildSpawn.pipe())
        let output = try #require(ChildSpawn.pipe())
        let filter = try ChildSpawn(
            executable: "/usr/bin/perl", arguments: [root.appendingPathComponent("Scripts/relay-cluster.d/nginx-log-filter.pl").path],
            environment: ["PATH": "/usr/bin:/bin"], input: input.read, output: output.write, error: nil)
        close(input.read)
        close(output.write)
        defer { close(output.read) }
        let line = "2026/11/28 08:40:44 [error] 14551#14551: *7 connect() failed (111: Connection refused) while connecting to upstream, "
            + "client: 127.0.0.1, server: , request: \"GET /cable/new/0123456789abcdef HTTP/1.1\", upstream: \"http://127.0.0.1:45029/cable/new/x\"\n"
        for _ in 0..<3 { #expect(write(input.write, line, line.utf8.count) == line.utf8.count) }
        // Its input stays open (nginx still "runs"): the first line comes through at once.
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .seconds(10)
        while !received.contains(UInt8(ascii: "\n")), ContinuousClock.now < deadline {
            var watched = pollfd(fd: output.read, events: Int16(POLLIN), revents: 0)
            guard poll(&watched, 1, 100) > 0 else { continue }
            let count = read(output.read, &chunk, chunk.count)
            if count <= 0 { break }
            received += chunk[0..<count]
        }
        try await Task.sleep(for: .milliseconds(200))  // the other two read and held back
        filter.signal(SIGTERM)
        while ContinuousClock.now < deadline {
            let count = read(output.read, &chunk, chunk.count)
            if count <= 0 { break }
            received += chunk[0..<count]
        }
        close(input.write)
        let text = String(decoding: received, as: UTF8.self)
        #expect(text.components(separatedBy: "connect() failed").count - 1 == 2, "the line, then its count: \(text)")
        #expect(text.contains("[notice] relay-cluster: 2 more lines like the one at "), "\(text)")
        #expect(text.contains("/cable/new/0123…") && !text.contains("0123456789abcdef"), "the IDs are cut: \(text)")
    }
}
