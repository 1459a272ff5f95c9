import Foundation
import CTAP2
import HybridCore
import HybridSim
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The programs as a user without privileges runs them. CI and this lab's machines run as root,
/// where a socket option that needs a capability succeeds silently: until 2026-11-25 every relay
/// and tunnel connection asked for `SOL_SOCKET`/`SO_DEBUG` (option 1 at the wrong level, meant as
/// `TCP_NODELAY`), which needs `CAP_NET_ADMIN`, so for anyone else every connection failed with
/// "Permission denied". Under root these tests drop to `nobody` (uid 65534) with `setpriv`.
@Suite("End to end: without root", .serialized)
struct EndToEndUnprivilegedTests {
    static let nobody: uid_t = 65534

    /// Starts `hybrid-sim <arguments>` as an unprivileged user: directly if this process is not
    /// root, else through `setpriv` as `nobody`, with the lab's directory handed to that user.
    static func startUnprivileged(_ lab: EndToEndLab, _ name: String, _ arguments: [String]) async throws -> ChildProcess {
        let binary = try HybridSimBinary.url().path
        guard geteuid() == 0 else { return try lab.startOther(name, [binary] + arguments) }
        let setpriv = "/usr/bin/setpriv"
        try #require(FileManager.default.isExecutableFile(atPath: setpriv), "util-linux's setpriv drops root for this test")
        try #require(chown(lab.home, nobody, gid_t(nobody)) == 0, "chown \(lab.home): errno \(errno)")
        // The build directory may sit under a directory `nobody` cannot enter (/root): run a link
        // to the binary (a copy on another file system) from the lab's directory.
        let reachable = lab.file("hybrid-sim")
        if !FileManager.default.fileExists(atPath: reachable), link(binary, reachable) != 0 {
            try FileManager.default.copyItem(atPath: binary, toPath: reachable)
        }
        let drop = ["--reuid=\(nobody)", "--regid=\(nobody)", "--clear-groups"]
        // Say so plainly if `nobody` cannot run it at all (a directory above the lab it cannot
        // enter, /tmp mounted noexec, a Swift runtime it cannot read, uid 65534 not mapped).
        let probe = try lab.startOther("probe", [setpriv] + drop + [reachable, "--help"])
        let probed = try await probe.waitForExit(timeout: .seconds(30))
        try #require(probed == 0, "nobody (uid \(nobody)) cannot run \(reachable): \(probe.transcript)")
        return try lab.startOther(name, [setpriv] + drop + [reachable] + arguments)
    }

    @Test("demo: relay, desktop and phone connect and verify without privileges")
    func demo() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let demo = try await Self.startUnprivileged(lab, "demo", ["demo", "--home", lab.file("demo")])
        #expect(try await demo.waitForExit(timeout: .seconds(90)) == 0, "\(demo.transcript)")
        #expect(!demo.standardError.text.contains("Permission denied"), "\(demo.transcript)")
        #expect(demo.standardError.text.contains("every result was verified"), "\(demo.transcript)")
    }

    @Test(
        "relay on one loop (it accepts on its loop) and on two (its dispatcher hands connections over), loaded by bench relay's lean generator",
        arguments: [1, 2]
    )
    func relay(eventLoops: Int) async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let relay = try await Self.startUnprivileged(
            lab, "relay", ["relay", "--port", "0", "--event-loops", "\(eventLoops)", "--log-level", "warning"])
        let lines = try await relay.waitForOutput("ready line") { $0.contains { $0.contains("ws://") } }
        let line = try #require(lines.first { $0.contains("ws://") })
        let url = try #require(line.split(separator: " ").first { $0.hasPrefix("ws://") }).description
        let bench = try await Self.startUnprivileged(
            lab, "bench relay", ["bench", "relay", "--url", url, "--tunnels", "40", "--rounds", "2", "--json"])
        #expect(try await bench.waitForExit(timeout: .seconds(60)) == 0, "\(bench.transcript)\n\(relay.transcript)")
        let report = try JSONSerialization.jsonObject(with: Data(bench.standardOutput.text.utf8)) as? [String: Any]
        #expect(report?["tunnelsOpened"] as? Int == 40, "\(bench.transcript)")
        #expect((report?["failures"] as? [String: Any])?.isEmpty == true, "\(bench.transcript)")
    }
}

extension EndToEndUnprivilegedTests {
    @Test("a version-1 phone-link.json the phone may read but not rewrite: --listen fails naming the file, and leaves it as it was")
    func upgradeWriteFails() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // A store directory the phone cannot write in: owned by root when the test drops to
        // `nobody`, mode 0555 when it runs unprivileged already. The file itself is readable.
        let directory = lab.file("read-only-store")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let path = directory + "/phone-link.json"
        let identity = PhoneLinkStore.Identity(name: "Old phone")
        let version1 = """
            {"version":1,"rootSecret":"\(Base64URL.encode(identity.rootSecret))","identityKey":"\(Base64URL.encode(identity.identityKey))",\
            "contactId":"\(Base64URL.encode(Array(repeating: UInt8(0xC1), count: 32)))","name":"Old phone","pairingIds":[],"revokedContactIds":[]}
            """
        try Data(version1.utf8).write(to: URL(fileURLWithPath: path))
        try #require(chmod(path, 0o644) == 0)
        let unprivileged = geteuid() != 0
        if unprivileged { try #require(chmod(directory, 0o555) == 0) }
        defer { if unprivileged { chmod(directory, 0o755) } }
        let phone = try await Self.startUnprivileged(
            lab, "phone",
            ["phone", "--listen", "--store", directory + "/passkeys.json", "--relay", "ws://127.0.0.1:9", "--listen-timeout", "5"])
        let status = try await phone.waitForExit(timeout: .seconds(30))
        #expect(status == 2, "\(phone.transcript)")
        let error = phone.standardError.lines.last ?? ""
        #expect(error.hasPrefix("error: ") && error.contains(path) && error.contains("ermission denied"), "\(phone.transcript)")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == version1, "the version-1 file is left as it was")
    }

    @Test("a store in a directory this user cannot write in: phone and desktop exit 2 before any socket, not after the user approved")
    func storeNotWritableAtStart() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // Root's directory when the test drops to `nobody`; mode 0555 when it runs unprivileged.
        let directory = lab.file("not-mine")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        let unprivileged = geteuid() != 0
        if unprivileged { try #require(chmod(directory, 0o555) == 0) }
        defer { if unprivileged { chmod(directory, 0o755) } }
        let port = try EndToEndLab.closedPort()
        let url = ClientSession(requestType: .makeCredential, timestamp: 0).url
        let cannotWrite = "cannot write the store: this user cannot write in \(directory): Permission denied"
        let phone = try await Self.startUnprivileged(
            lab, "phone",
            [
                "phone", "--qr", url, "--store", directory + "/passkeys.json", "--relay", "ws://127.0.0.1:\(port)",
                "--proximity", "udp://127.0.0.1:\(port)",
            ])
        #expect(try await phone.waitForExit(timeout: .seconds(30)) == 2, "\(phone.transcript)")
        #expect(
            FailureOutput.singleErrorLine(phone).hasPrefix(
                "error: cannot use the passkey store: \(directory)/passkeys.json: \(cannotWrite)"), "\(phone.transcript)")
        let desktop = try await Self.startUnprivileged(
            lab, "desktop",
            ["desktop", "--request", "mc", "--rp-store", directory + "/rp.json", "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await desktop.waitForExit(timeout: .seconds(30)) == 2, "\(desktop.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop).hasPrefix(
                "error: cannot use the relying-party store: \(directory)/rp.json: \(cannotWrite)"), "\(desktop.transcript)")
        #expect(desktop.standardOutput.text.isEmpty, "no QR code")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "nothing created")
    }

    /// A walkthrough: after a run as root left a root-owned lock file, the owner's next run failed
    /// (after consent) saying "its directory must be writable", which it was.
    @Test("a lock file another user owns in a writable directory: the phone says so and what to do, at start")
    func lockFileOfAnotherUser() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let store = lab.file("passkeys.json")
        let lock = store + ".lock"
        _ = FileManager.default.createFile(atPath: lock, contents: nil)
        // Root's file when the test drops to `nobody`; mode 0400 when it runs unprivileged.
        try #require(chmod(lock, geteuid() == 0 ? 0o600 : 0o400) == 0)
        let port = try EndToEndLab.closedPort()
        let url = ClientSession(requestType: .makeCredential, timestamp: 0).url
        let phone = try await Self.startUnprivileged(
            lab, "phone",
            ["phone", "--qr", url, "--store", store, "--relay", "ws://127.0.0.1:\(port)", "--proximity", "udp://127.0.0.1:\(port)"])
        #expect(try await phone.waitForExit(timeout: .seconds(30)) == 2, "\(phone.transcript)")
        let line = FailureOutput.singleErrorLine(phone)
        #expect(line.hasPrefix("error: cannot use the passkey store: \(store): cannot lock the store: cannot open the lock file \(lock): Permission denied (the lock file is owned by uid "), "\(line)")
        #expect(line.hasSuffix("cannot write it: remove it, it holds no data and the next write makes a new one, or give it to this user)"), "\(line)")
        #expect(!line.contains("directory"), "the directory is writable: \(line)")
    }
}
