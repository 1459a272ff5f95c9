import Foundation
import HybridFiles
import HybridCore
import HybridRuntime
import HybridSim
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Scripts/relay-cluster`: two relay instances behind nginx, routed by routing ID. Load from
/// `hybrid-sim bench relay` and a QR registration and sign-in go through the proxy; every
/// `/cable/connect` must reach the instance that owns its tunnel (a misrouted one is a 404).
@Suite("End to end: relay cluster behind nginx")
struct EndToEndRelayClusterTests {
    /// The repository root (this file is `Tests/HybridSimTests/…`).
    private static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Runs `Scripts/relay-cluster ARGUMENTS` to the end (30 s at most) with `binary` as its
    /// `HYBRID_SIM` (the built one by default); returns status and stdout+stderr.
    static func cluster(_ arguments: [String], binary: String? = nil) throws -> (Int32, String) {
        var environment = ProcessInfo.processInfo.environment
        environment["HYBRID_SIM"] = try binary ?? HybridSimBinary.url().path
        // Into a file, not a pipe: the relays and nginx it starts in the background may keep a
        // copy of the descriptor, and a pipe would then not end when the script does.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("cluster-\(UUID().uuidString).log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        defer {
            try? handle.close()
            try? FileManager.default.removeItem(at: output)
        }
        let process = try ChildSpawn(
            executable: root.appendingPathComponent("Scripts/relay-cluster").path, arguments: arguments, environment: environment,
            input: nil, output: handle.fileDescriptor, error: handle.fileDescriptor)
        let deadline = ContinuousClock.now + .seconds(30)
        while process.isRunning, ContinuousClock.now < deadline { usleep(20_000) }
        if process.isRunning {
            process.signal(SIGTERM)
            let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
            throw ChildProcessError("relay-cluster \(arguments.first ?? "") did not finish within 30 s:\n\(printed)")
        }
        return (process.ended?.shellStatus ?? -1, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }

    /// Whether nginx is there; records why the test cannot run when it is not.
    static func nginxInstalled() -> Bool {
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
            Issue.record("nginx is not installed: Scripts/install-deps installs it (Debian package nginx)")
            return false
        }
        return true
    }

    /// The pid relay-cluster recorded for instance `index` in `directory`.
    private static func pid(ofInstance index: Int, in directory: String) throws -> String {
        try String(contentsOfFile: "\(directory)/relay-\(index).pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Starts two instances behind two nginx workers on a free proxy port, in `lab`'s directory
    /// `cluster`, with `relayFlags` after `--`; a start that fails is stopped and fails the test.
    /// The caller stops the cluster.
    private static func startTwo(in lab: EndToEndLab, relayFlags: [String]) throws -> (directory: String, proxy: String, output: String) {
        let port = try EndToEndLab.closedPort()
        let directory = lab.file("cluster")
        let (status, output) = try cluster(
            ["start", "--instances", "2", "--workers", "2", "--port", "\(port)", "--dir", directory, "--"] + relayFlags)
        if status != 0 { _ = try? cluster(["stop", "--dir", directory]) }
        try #require(status == 0, "\(output)")
        return (directory, "ws://127.0.0.1:\(port)", output)
    }

    @Test("bench relay and a QR registration and sign-in through the proxy; stop leaves nothing running")
    func clusterRoutesByRoutingID() async throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (directory, proxy, output) = try Self.startTwo(in: lab, relayFlags: ["--max-messages-per-peer", "1000"])
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        #expect(output.contains("relay 0 (routing IDs 00…") && output.contains("relay 1 (routing IDs 01…"), "\(output)")
        #expect(output.contains("ready on \(proxy)"), "\(output)")
        let pids = try (0..<2).map { try Self.pid(ofInstance: $0, in: directory) }

        // 40 tunnels: /cable/new is spread over both instances; a connect sent to the wrong one would fail.
        let bench = try lab.start(
            "bench",
            ["bench", "relay", "--url", proxy, "--tunnels", "40", "--rounds", "2", "--relay-pid", pids.joined(separator: ","),
             "--json"])
        #expect(try await bench.waitForExit(timeout: .seconds(60)) == 0, "\(bench.transcript)")
        let report = try #require(
            JSONSerialization.jsonObject(with: Data(bench.standardOutput.text.utf8)) as? [String: Any], "\(bench.transcript)")
        #expect(report["tunnelsOpened"] as? Int == 40)
        #expect((report["failures"] as? [String: Int])?.isEmpty == true, "\(bench.transcript)")
        #expect(report["relayProcesses"] as? Int == 2)

        // The product path through the proxy: register, then sign in.
        let desktop = try await lab.startDesktop(["--request", "mc", "--relay", proxy, "--user", "carol"])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let signIn = try await lab.startDesktop(["--relay", proxy])
        let signer = try lab.startPhone(for: signIn, ["--qr", signIn.url])
        #expect(try await signIn.process.waitForExit() == 0, "\(signIn.process.transcript)\n\(signer.transcript)")
        #expect(try await signer.waitForExit() == 0, "\(signer.transcript)")

        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 0, "\(stopOutput)")
        for pid in pids.compactMap({ Int32($0) }) {
            #expect(kill(pid, 0) != 0, "relay \(pid) still running after stop")
        }
    }

    @Test("after a burst that filled every instance, the next /cable/new requests reach them again (nginx used to keep answering 502 'no live upstreams' until a probe tunnel closed)")
    func fullInstancesComeBack() async throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let (directory, proxy, _) = try Self.startTwo(in: lab, relayFlags: ["--max-tunnels", "20"])
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        func bench(_ tunnels: Int) async throws -> [String: Int] {
            let run = try lab.start("bench-\(tunnels)", ["bench", "relay", "--url", proxy, "--tunnels", "\(tunnels)", "--rounds", "1", "--json"])
            _ = try await run.waitForExit(timeout: .seconds(60))
            let report = try #require(
                JSONSerialization.jsonObject(with: Data(run.standardOutput.text.utf8)) as? [String: Any], "\(run.transcript)")
            return report["failures"] as? [String: Int] ?? [:]
        }
        // 60 tunnels for 40 places: the instances fill and refuse (503), nginx runs out of them.
        #expect(!(try await bench(60)).isEmpty, "the burst was meant to overflow")
        try await Task.sleep(for: .seconds(2))  // past nginx's old 1 s fail_timeout; the tunnels are closed
        let after = try await bench(30)
        #expect(after.isEmpty, "30 tunnels into two empty instances of 20: \(after)")
    }

    @Test("a running cluster survives a second start (exit 3) and a usage error (exit 64); restart 0 keeps its port and prefix; a sign-in works after it")
    func runningClusterKeptAndRestarted() async throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let port = try EndToEndLab.closedPort()
        let directory = lab.file("cluster")
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        // --relay-ports: the instance on a port of its own (BASE + 0), which restart takes again.
        let relayPort = try EndToEndLab.closedPort()
        let arguments = [
            "--instances", "1", "--workers", "1", "--addresses", "1", "--port", "\(port)", "--relay-ports", "\(relayPort)",
            "--dir", directory,
        ]
        let (status, output) = try Self.cluster(["start"] + arguments)
        try #require(status == 0, "\(output)")
        #expect(output.contains("on ws://127.0.0.1:\(relayPort), pid"), "\(output)")
        let first = try Self.pid(ofInstance: 0, in: directory)
        // The log filter reads its pipe read-only: a writer of its own kept it from ever seeing
        // the end of nginx's output, and every stop waited seconds for it.
        let filter = try String(contentsOfFile: "\(directory)/nginx-log.pid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let fdinfo = try String(contentsOfFile: "/proc/\(filter)/fdinfo/0", encoding: .utf8)
        let flags = try #require(fdinfo.split(separator: "\n").first { $0.hasPrefix("flags:") }.flatMap { Int($0.dropFirst(6).trimmingCharacters(in: .whitespaces), radix: 8) })
        #expect(flags & Int(O_ACCMODE) == Int(O_RDONLY), "the filter's standard input is not read-only: \(fdinfo)")

        let (again, againOutput) = try Self.cluster(["start"] + arguments)
        #expect(again == 3 && againOutput.contains("a cluster is already running in \(directory)"), "\(againOutput)")
        let (usage, usageOutput) = try Self.cluster(["start", "--addresses", "0", "--dir", directory])
        #expect(usage == 64 && usageOutput.contains("--addresses must be 1...254"), "\(usageOutput)")
        #expect(kill(Int32(first) ?? 0, 0) == 0, "the running relay was stopped: \(againOutput)\n\(usageOutput)")

        let (restarted, restartOutput) = try Self.cluster(["restart", "0", "--dir", directory])
        #expect(restarted == 0, "\(restartOutput)")
        let second = try Self.pid(ofInstance: 0, in: directory)
        #expect(second != first, "\(restartOutput)")
        #expect(restartOutput.contains("restarted on ws://127.0.0.1:\(relayPort)"), "\(restartOutput)")
        let (statusCode, statusOutput) = try Self.cluster(["status", "--dir", directory])
        #expect(statusCode == 0 && statusOutput.contains("pid \(second)"), "all up: \(statusOutput)")
        // The run before the restart keeps its output: both runs' listening lines are there.
        let printed = try String(contentsOfFile: directory + "/relay-0.out", encoding: .utf8)
        #expect(printed.components(separatedBy: "ws://127.0.0.1:\(relayPort)").count - 1 == 2, "\(printed)")

        // The proxy still routes to it: a QR registration through the proxy.
        let proxy = "ws://127.0.0.1:\(port)"
        let desktop = try await lab.startDesktop(["--request", "mc", "--relay", proxy])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")

        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 0, "\(stopOutput)")
        #expect(kill(Int32(second) ?? 0, 0) != 0, "relay \(second) still running after stop: \(stopOutput)")
    }

    @Test("a proxy port already taken: start exits 1, says so, and leaves no relay running")
    func portTaken() throws {
        guard Self.nginxInstalled() else { return }
        // A listener without SO_REUSEPORT holds the port against nginx's reuseport sockets.
        let (holder, port) = try EndToEndLab.boundSocket(listening: true)
        defer { close(holder) }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let (status, output) = try Self.cluster(
            ["start", "--instances", "2", "--workers", "1", "--port", "\(port)", "--dir", directory])
        #expect(status == 1, "\(output)")
        // Found before anything starts: nginx's reuseport bind would not fail next to another
        // reuseport listener (a second cluster), so the script looks for a listener first.
        #expect(output.contains("relay-cluster: something already listens on 127.0.0.1:\(port)"), "\(output)")
        #expect(!output.contains("relay-cluster: relay "), "no relay started: \(output)")
    }

    @Test("usage errors exit 64 before anything starts: an option without its value, a relay flag the script sets itself")
    func usageErrors() throws {
        let (missing, missingOutput) = try Self.cluster(["start", "--instances"])
        #expect(missing == 64 && missingOutput.contains("relay-cluster: --instances needs a value"), "\(missingOutput)")
        for flag in ["--routing-id-prefix", "--port=5", "--contacts"] {
            let (status, output) = try Self.cluster(["start", "--", "--max-tunnels", "10", flag, "05"])
            #expect(status == 64, "\(output)")
            #expect(output.contains("relay-cluster: \(flag.split(separator: "=")[0]) is set by the script for each instance"), "\(output)")
            #expect(!output.contains("relay-cluster: relay "), "nothing started: \(output)")
        }
    }

    @Test("a relay that exits at once (a bad relay flag after --): start says so without waiting out its 10 s, exits 64 as for its own bad flags, and cleans up")
    func relayFailsToStart() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let start = ContinuousClock.now
        let (status, output) = try Self.cluster(
            ["start", "--instances", "2", "--workers", "1", "--port", "\(try EndToEndLab.closedPort())", "--dir", directory, "--",
             "--bogus"])
        #expect(status == 64, "\(output)")
        #expect(output.contains("relay-cluster: relay 0 did not start:"), "\(output)")
        #expect(ContinuousClock.now - start < .seconds(8), "it noticed the relay had exited")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        #expect(!left.contains { $0.hasSuffix(".pid") }, "\(left)")
    }

    @Test("one start, stop or restart at a time in a directory: another finds it locked and exits 3 without touching it")
    func busyDirectoryRefused() throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // Another relay-cluster command holding the directory's lock.
        let holder = try Self.holdLock(in: directory)
        defer { holder.signal(SIGKILL) }
        for command in [["start", "--instances", "1", "--port", "\(try EndToEndLab.closedPort())"], ["stop"], ["restart", "0"]] {
            let (status, output) = try Self.cluster(command + ["--dir", directory])
            #expect(status == 3, "\(command): \(output)")
            #expect(output.contains("another relay-cluster start, stop or restart is running in \(directory)"), "\(output)")
            #expect(!output.contains("relay-cluster: relay "), "nothing started: \(output)")
        }
        let (status, output) = try Self.cluster(["status", "--dir", directory])
        #expect(status == 3 && output.contains("is in progress in \(directory) (it holds \(directory)/.lock)"),
                "status takes no lock, and says another command holds it (3): \(output)")
    }

    @Test("stop waits for a relay whose --close-timeout is past its usual 10 s (a peer that never answers the close frame): ended, not killed")
    func longCloseTimeoutWaited() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let (started, startOutput) = try Self.cluster(
            ["start", "--instances", "1", "--workers", "1", "--port", "\(port)", "--dir", directory, "--", "--close-timeout", "11"])
        try #require(started == 0, "\(startOutput)")
        // A creator that is upgraded and then reads nothing: the relay's close frame is never answered.
        let peer = try #require(LoopbackSocket.connect(port: port))
        defer { close(peer) }
        let tunnelID = (0..<16).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        #expect(LoopbackSocket.send(peer, """
            GET /cable/new/\(tunnelID) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
            Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: fido.cable\r\n\r\n
            """))
        let answer = LoopbackSocket.receive(peer, until: "\r\n\r\n")
        try #require(answer.hasPrefix("HTTP/1.1 101"), "\(answer)")
        let start = ContinuousClock.now
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 0, "\(stopOutput)")
        #expect(!stopOutput.contains("SIGKILL") && !stopOutput.contains("killed"), "\(stopOutput)")
        #expect(ContinuousClock.now - start >= .seconds(10), "the relay waited out its close timeout: \(stopOutput)")
    }

    @Test("too few nginx workers for full instances: start notes it with the --workers that would carry them (from --max-tunnels when given)")
    func workersNote() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for (relayFlags, note) in [
            ([String](), "note: 1 nginx worker(s) take at most 19000 connections, and 2 full instance(s) of 9900 tunnels need 79200 (4 a tunnel): past about 4750 tunnels the proxy refuses connections; --workers 5 or more carries them"),
            (["--", "--max-tunnels", "2000"], nil),
        ] {
            let directory = lab.file("cluster-\(relayFlags.count)")
            let (started, output) = try Self.cluster(
                ["start", "--instances", "2", "--workers", "1", "--port", "\(try EndToEndLab.closedPort())", "--dir", directory] + relayFlags)
            _ = try? Self.cluster(["stop", "--dir", directory])
            #expect(started == 0, "\(output)")
            if let note {
                #expect(output.contains(note), "\(output)")
            } else {
                #expect(!output.contains("note:"), "2 × 2,000 tunnels fit one worker: \(output)")
            }
        }
    }

    @Test("linked phones survive a stop and start (new relay ports): each contact ID still reaches the instance whose contacts file knows it, so a desktop gets 504 (link kept), not 410, with no grace")
    func contactsSurviveStopAndStart() async throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        let proxy = "ws://127.0.0.1:\(port)"
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let start = ["start", "--instances", "4", "--workers", "2", "--port", "\(port)", "--dir", directory, "--", "--contact-grace", "0"]
        let (started, startOutput) = try Self.cluster(start)
        try #require(started == 0, "\(startOutput)")
        // Eight phones listen once, each on the instance its contact ID hashes to.
        let tokens = (0..<8).map { index in ListenToken(bytes: Array(repeating: UInt8(index + 1), count: ListenToken.size))! }
        for token in tokens {
            var options = WebSocketTunnel.Options()
            options.extraHeaders = [(PushChannel.listenTokenHeader, token.base64URL)]
            let channel = try await WebSocketTunnel.open(
                url: proxy + TunnelServicePath.listenPath(contactID: token.contactID), timeout: .seconds(5), options: options)
            await channel.close()
        }
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        try #require(stopped == 0, "\(stopOutput)")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.hasPrefix("contacts-") && $0.hasSuffix(".json") }
        let remembered = try files.flatMap { try RelayContactFile.load(path: directory + "/" + $0).known }
        #expect(Set(remembered) == Set(tokens.map(\.contactID)), "every ID in one instance's file: \(files)")

        let (again, againOutput) = try Self.cluster(start)
        try #require(again == 0, "\(againOutput)")
        let statuses = await withTaskGroup(of: Int?.self) { group in
            for token in tokens {
                group.addTask {
                    var options = WebSocketTunnel.Options()
                    let payload = ClientPayload(pairingID: Array(repeating: 7, count: 8), clientNonce: Array(repeating: 9, count: 16), requestType: .getAssertion)
                    options.extraHeaders = [(HybridConstants.clientPayloadHeader, payload.headerValue)]
                    do {
                        let tunnel = try await WebSocketTunnel.open(
                            url: proxy + TunnelServicePath.contact(contactID: token.contactID).path, timeout: .seconds(10), options: options)
                        await tunnel.close()
                        return 101
                    } catch {
                        return (error as? RuntimeError)?.httpStatus
                    }
                }
            }
            var all: [Int?] = []
            for await status in group { all.append(status) }
            return all
        }
        #expect(statuses == Array(repeating: 504, count: tokens.count), "\(statuses)")
    }

    /// A one-instance cluster in a fresh directory whose relay has a change to save (a phone
    /// listened once) and cannot save it: a directory with something in it stands where its contact
    /// file was, and no save can rename over it. `body` gets the cluster's directory.
    private func withUnsavableContacts(_ body: (String) throws -> Void) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let (started, startOutput) = try Self.cluster(["start", "--instances", "1", "--workers", "1", "--port", "\(port)", "--dir", directory])
        try #require(started == 0, "\(startOutput)")
        let file = directory + "/contacts-0.json"
        try? FileManager.default.removeItem(atPath: file)
        try FileManager.default.createDirectory(atPath: file + "/blocked", withIntermediateDirectories: true)
        let token = ListenToken(bytes: Array(repeating: 42, count: ListenToken.size))!
        var options = WebSocketTunnel.Options()
        options.extraHeaders = [(PushChannel.listenTokenHeader, token.base64URL)]
        let channel = try await WebSocketTunnel.open(
            url: "ws://127.0.0.1:\(port)" + TunnelServicePath.listenPath(contactID: token.contactID), timeout: .seconds(5), options: options)
        await channel.close()
        try body(directory)
    }

    @Test("a relay that cannot save its contact file when it stops: stop repeats its error and exits 1 (the relays are not the script's children: its exit status was not seen)")
    func stopReportsRelayError() async throws {
        guard Self.nginxInstalled() else { return }
        try await withUnsavableContacts { directory in
            let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
            #expect(stopped == 1, "\(stopOutput)")
            #expect(stopOutput.contains("relay-cluster: relay-0 wrote while stopping (its stderr, \(directory)/relay-0.err):"), "\(stopOutput)")
            #expect(stopOutput.contains("--contacts: the contact memory is not saved"), "\(stopOutput)")
            #expect(stopOutput.contains("relay-cluster: a relay reported an error while stopping (above)"), "\(stopOutput)")
            #expect(stopOutput.contains("relay-cluster: stopped"), "everything stopped all the same: \(stopOutput)")
        }
    }

    @Test("a relay's stderr file moved away (rotated) while it runs: stop still repeats the error it wrote while stopping (read from the relay's stderr itself, not the path)")
    func stopReportsErrorAfterRotation() async throws {
        guard Self.nginxInstalled() else { return }
        try await withUnsavableContacts { directory in
            try FileManager.default.moveItem(atPath: directory + "/relay-0.err", toPath: directory + "/relay-0.err.1")
            let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
            #expect(stopped == 1, "\(stopOutput)")
            #expect(stopOutput.contains("relay-cluster: relay-0 wrote while stopping"), "\(stopOutput)")
            #expect(stopOutput.contains("--contacts: the contact memory is not saved"), "\(stopOutput)")
            #expect(stopOutput.contains("relay-cluster: stopped"), "\(stopOutput)")
        }
    }

    @Test("restart repeats what the relay wrote while stopping and restarts it anyway (here it cannot start again: its contact file is a directory, exit 1 saying so)")
    func restartReportsRelayError() async throws {
        guard Self.nginxInstalled() else { return }
        try await withUnsavableContacts { directory in
            let (restarted, output) = try Self.cluster(["restart", "0", "--dir", directory])
            #expect(output.contains("relay-cluster: relay-0 wrote while stopping"), "\(output)")
            #expect(output.contains("--contacts: the contact memory is not saved"), "\(output)")
            #expect(output.contains("relay-cluster: restarting it anyway"), "\(output)")
            #expect(restarted == 1 && output.contains("relay-cluster: relay 0 did not start again"), "\(output)")
        }
    }

    @Test("nginx workers whose master was killed: status names them, stop ends them, and a new start can take the port")
    func orphanedWorkersStopped() throws {
        guard Self.nginxInstalled() else { return }
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        let port = try EndToEndLab.closedPort()
        defer { _ = try? Self.cluster(["stop", "--dir", directory]) }
        let (started, startOutput) = try Self.cluster(
            ["start", "--instances", "1", "--workers", "2", "--port", "\(port)", "--dir", directory])
        try #require(started == 0, "\(startOutput)")
        let master = try #require(Int32(try String(contentsOfFile: directory + "/nginx.pid", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(kill(master, SIGKILL) == 0)
        usleep(300_000)
        let (statusCode, status) = try Self.cluster(["status", "--dir", directory])
        #expect(statusCode == 1 && status.contains("nginx: master gone, 2 orphaned workers still serving"), "a part is down: 1, \(status)")
        let (stopped, stopOutput) = try Self.cluster(["stop", "--dir", directory])
        #expect(stopped == 0 && stopOutput.contains("nginx worker (pid"), "\(stopOutput)")
        let (restarted, restartOutput) = try Self.cluster(
            ["start", "--instances", "1", "--workers", "1", "--port", "\(port)", "--dir", directory])
        #expect(restarted == 0, "the orphans no longer hold the port: \(restartOutput)")
    }

    @Test("stop signals only its own processes: a stale pid file naming another process leaves that process alone")
    func stopLeavesOtherProcesses() throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("cluster")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A process that is not the cluster's, under the pids a dead cluster's files would name.
        let bystander = try ChildSpawn(
            executable: "/bin/sleep", arguments: ["30"], environment: ProcessInfo.processInfo.environment,
            input: nil, output: nil, error: nil)
        defer { bystander.signal(SIGTERM) }
        for name in ["relay-0.pid", "nginx.pid"] {
            try "\(bystander.pid)\n".write(toFile: directory + "/" + name, atomically: true, encoding: .utf8)
        }
        let (status, output) = try Self.cluster(["stop", "--dir", directory])
        #expect(status == 0, "\(output)")
        #expect(bystander.isRunning, "stop signalled a process it did not start: \(output)")
        #expect(output.contains("relay-0.pid names pid \(bystander.pid), which is not this cluster's process any more; left alone"), "\(output)")
        #expect(output.contains("nginx.pid names pid"), "\(output)")
        let left = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        #expect(!left.contains { $0.hasSuffix(".pid") }, "stale pid files removed: \(left)")
    }
}
