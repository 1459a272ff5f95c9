import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import Testing

/// `hybrid-sim relay --contacts FILE`: a relay that remembers linked phones across restarts.
@Suite("End to end: relay --contacts")
struct EndToEndRelayContactsTests {
    @Test("a relay restarted with --contacts and no grace still knows the linked phone: 504 and the link kept; one restarted without it says unknown: 410 and the link deleted; the file is 0600 and one relay's")
    func linksSurviveARestart() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let contacts = lab.file("relay-contacts.json")
        let links = lab.file("links.json")
        let (first, firstURL) = try await lab.startRelay(["--contacts", contacts])

        // Linked by QR code, then one linked sign-in: the phone listened on this relay.
        let desktop = try await lab.startDesktop(["--request", "mc", "--link", "--relay", firstURL])
        let phone = try lab.startPhone(for: desktop, ["--qr", desktop.url])
        #expect(try await desktop.process.waitForExit() == 0, "\(desktop.process.transcript)\n\(phone.transcript)")
        #expect(try await phone.waitForExit() == 0, "\(phone.transcript)")
        let proximityPort = try EndToEndLab.closedPort(udp: true)
        let listener = try await lab.startListener("listener", relayURL: firstURL, proximityPort: proximityPort, ["--count", "1", "--listen-timeout", "60"])
        let signIn = try lab.start(
            "linked", ["desktop", "--request", "ga", "--linked", "any", "--relay", firstURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await signIn.waitForExit(timeout: .seconds(40)) == 0, "\(signIn.transcript)\n\(listener.transcript)")
        #expect(try await listener.waitForExit() == 0, "\(listener.transcript)")
        first.terminate()
        #expect(try await first.waitForExit() == 0, "\(first.transcript)")
        let contactID = try #require(try LinkStore.load(path: links).links.first?.contactID)
        #expect(try RelayContactFile.load(path: contacts).known == [contactID])
        let mode = (try FileManager.default.attributesOfItem(atPath: contacts)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)

        // Restarted with the file and no grace: the phone is known, not listening (504, exit 6), link kept.
        let (second, secondURL) = try await lab.startRelay(["--contacts", contacts, "--contact-grace", "0"])
        let rival = try lab.start("relay-rival", ["relay", "--port", "0", "--contacts", contacts])
        #expect(try await rival.waitForExit() == 1, "\(rival.transcript)")
        #expect(FailureOutput.singleErrorLine(rival).contains("another process holds \(contacts).lock"), "\(rival.transcript)")
        let kept = try lab.start(
            "linked-kept", ["desktop", "--request", "ga", "--linked", "any", "--relay", secondURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await kept.waitForExit(timeout: .seconds(30)) == 6, "\(kept.transcript)")
        #expect(FailureOutput.singleErrorLine(kept).hasSuffix("The link is kept (for a phone that was wiped or lost, remove it: `hybrid-sim desktop --forget 'HybridSim phone'`)."), "\(kept.transcript)")
        #expect(try LinkStore.load(path: links).links.count == 1)
        second.terminate()
        #expect(try await second.waitForExit() == 0, "\(second.transcript)")

        // Restarted without it: the relay has forgotten the phone (410 unknown, exit 8), the link goes.
        let (third, thirdURL) = try await lab.startRelay(["--contact-grace", "0"])
        defer { third.terminate() }
        let forgotten = try lab.start(
            "linked-forgotten", ["desktop", "--request", "ga", "--linked", "any", "--relay", thirdURL, "--proximity-port", "\(proximityPort)"])
        #expect(try await forgotten.waitForExit(timeout: .seconds(30)) == 8, "\(forgotten.transcript)")
        #expect(try LinkStore.load(path: links).links.isEmpty)
    }

    @Test("a damaged --contacts file: exit 2 naming the file and the member, before listening; the file is left as it is")
    func damagedFileRefused() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let contacts = lab.file("relay-contacts.json")
        for (text, mention) in [
            (#"{"version":1,"known":["AAAA"]}"#, "known[0]: 3 bytes, where a contact ID is 32"),
            (#"{"version":2}"#, "unsupported store version: version 2: this build reads version 1"),
            (#"{"version":1,"revoked":["a+b"]}"#, "revoked[0]: not unpadded base64url"),
            (#"{"version":1,"known":"x"}"#, "known: wrong type: an array is required"),
            ("[1]", "not a store document"),
            ("{", "not JSON"),
        ] {
            try Data(text.utf8).write(to: URL(fileURLWithPath: contacts))
            let relay = try lab.start("relay", ["relay", "--port", "0", "--contacts", contacts, "--json"])
            #expect(try await relay.waitForExit() == 2, "\(text): \(relay.transcript)")
            let line = FailureOutput.singleErrorLine(relay)
            #expect(line.hasPrefix("error: --contacts: \(contacts): ") && line.contains(mention), "\(text): \(line)")
            #expect(!relay.standardOutput.text.contains("listening"), "\(relay.transcript)")
            #expect(relay.standardOutput.text.contains(#""event":"error""#), "\(relay.transcript)")
            #expect(try String(contentsOfFile: contacts, encoding: .utf8) == text)
        }
    }

    @Test("--contacts in a directory that does not exist: exit 2, nothing created; a save that fails at shutdown: the relay says so and exits 1")
    func missingDirectoryAndFailedSave() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let missing = lab.file("no-such-dir/contacts.json")
        let refused = try lab.start("relay-missing", ["relay", "--port", "0", "--contacts", missing])
        #expect(try await refused.waitForExit() == 2, "\(refused.transcript)")
        #expect(FailureOutput.singleErrorLine(refused).contains("the directory \(lab.file("no-such-dir")) does not exist"), "\(refused.transcript)")
        #expect(!FileManager.default.fileExists(atPath: lab.file("no-such-dir")))

        // The file's directory is replaced by a file, or removed, while the relay runs: the save of
        // a phone's listen fails, the directory is not made again, and the last line says what the
        // next start will do with the path.
        for replaced in [true, false] {
            let directory = lab.file("contacts-dir-\(replaced)")
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let file = directory + "/contacts.json"
            let (relay, url) = try await lab.startRelay(["--contacts", file])
            try FileManager.default.removeItem(atPath: directory)
            if replaced { try Data("not a directory".utf8).write(to: URL(fileURLWithPath: directory)) }
            let token = ListenToken(bytes: Array(repeating: 5, count: ListenToken.size))!
            var options = WebSocketTunnel.Options()
            options.extraHeaders = [(PushChannel.listenTokenHeader, token.base64URL)]
            let channel = try await WebSocketTunnel.open(
                url: url + TunnelServicePath.listenPath(contactID: token.contactID), timeout: .seconds(5), options: options)
            await channel.close()
            relay.terminate()
            #expect(try await relay.waitForExit() == 1, "\(relay.transcript)")
            let line = FailureOutput.singleErrorLine(relay)
            #expect(line.hasPrefix("error: --contacts: the contact memory is not saved ("), "\(line)")
            #expect(line.hasSuffix("; the next start refuses \(file) until \(directory) is a directory again"), "\(line)")
            var isDirectory: ObjCBool = false
            #expect(FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) == replaced && !isDirectory.boolValue)
        }
    }
}
