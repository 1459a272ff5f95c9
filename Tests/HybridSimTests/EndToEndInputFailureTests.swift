import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim
import HybridTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Bad input with the real binary: a damaged store, a file that cannot be read or written, options
/// or settings a browser or the relying party would refuse. Each ends with a documented status
/// (mostly 2, before any network traffic) and exactly one `error:` line on stderr, as the last line
/// (the other failure paths: ``EndToEndFailureTests``).
@Suite("End to end: bad input (processes)", .serialized)
struct EndToEndInputFailureTests {
    @Test("corrupted passkey store: the phone names the file, leaves it untouched, exit 2 before any network")
    func corruptedPasskeyStore() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let store = lab.file("broken-passkeys.json")
        let damaged = Array(#"{"version": 1, "passkeys": [{"credentialId": "#.utf8) + [0xFF, 0x00, 0x13]
        _ = FileManager.default.createFile(atPath: store, contents: Data(damaged))
        let port = try EndToEndLab.closedPort()
        let url = ClientSession(requestType: .getAssertion, timestamp: 0).url
        let phone = try lab.start(
            "phone",
            [
                "phone", "--qr", url, "--store", store, "--relay", "ws://127.0.0.1:\(port)", "--proximity",
                "udp://127.0.0.1:\(port)",
            ]
        )
        #expect(try await phone.waitForExit(timeout: .seconds(10)) == 2, "\(phone.transcript)")
        let error = FailureOutput.singleErrorLine(phone)
        #expect(error.hasPrefix("error: cannot use the passkey store: \(store): not JSON"), "\(error)")
        #expect(error.hasSuffix(" (the file is left as it is: fix it, or move it aside to start a new one)"), "\(error)")
        #expect(!phone.standardError.text.contains("relay"), "failed before the network")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: store))) == damaged, "the file is untouched")
    }

    @Test("corrupted relying-party store: the desktop names the file and exits 2 before showing a QR code")
    func corruptedRelyingPartyStore() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let damaged = Array(#"{"version": 2, "credentials": []}"#.utf8)
        _ = FileManager.default.createFile(atPath: lab.relyingPartyStore, contents: Data(damaged))
        let desktop = try lab.start("desktop", ["desktop", "--relay-port", "0", "--proximity-port", "0"])
        #expect(try await desktop.waitForExit(timeout: .seconds(10)) == 2, "\(desktop.transcript)")
        #expect(
            FailureOutput.singleErrorLine(desktop).hasPrefix(
                "error: cannot use the relying-party store: \(lab.relyingPartyStore): unsupported store version"
            )
        )
        #expect(FailureOutput.singleErrorLine(desktop).hasSuffix(
            "(the file is left as it is: use the hybrid-sim that wrote it, or move it aside to start a new one)"), "\(desktop.transcript)")
        #expect(desktop.standardOutput.text.isEmpty, "no QR code")
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: lab.relyingPartyStore))) == damaged)
    }

    @Test("desktop --qr-png into a missing directory or onto a directory, --link with a damaged links file: exit 2 before any socket, nothing created or changed")
    func desktopOutputFilesChecked() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let missing = lab.file("missing/dir")
        let links = lab.file("links.json")
        let damaged = #"{"version":1,"links":"x"}"# + "\n"
        try damaged.write(toFile: links, atomically: true, encoding: .utf8)
        for (arguments, message) in [
            (["--qr-png", missing + "/q.png"], "error: cannot write --qr-png \(missing)/q.png: the directory \(missing) does not exist"),
            (["--qr-png", lab.file("")], "error: cannot write --qr-png \(lab.file("")): it is a directory"),
            (
                ["--request", "mc", "--link", "--links", links],
                "error: cannot use the links file: \(links): not a store document: \"links\" is not an array (the file is left as it is: fix it, or move it aside to start a new one)"
            ),
        ] {
            let desktop = try await FailureOutput.expect(
                lab, ["desktop", "--relay-port", "0", "--proximity-port", "0", "--timeout", "5"] + arguments, status: 2,
                line: message)
            #expect(!desktop.standardError.text.contains("proximity scanner listening"), "no socket before the check")
        }
        #expect(!FileManager.default.fileExists(atPath: lab.file("missing")))
        #expect(try String(contentsOfFile: links, encoding: .utf8) == damaged)
    }

    @Test("an options file, a recording or a key log that cannot be read: the system's words (not Foundation's), exit 2")
    func unreadableInputFiles() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = lab.file("")
        let missing = lab.file("missing.json")
        let pipe = lab.file("options.fifo")
        #expect(mkfifo(pipe, 0o600) == 0)
        for (arguments, message) in [
            (["desktop", "--options", directory, "--relay-port", "0", "--proximity-port", "0"],
             "error: cannot read the options file \(directory): it is a directory"),
            (["desktop", "--options", missing, "--relay-port", "0", "--proximity-port", "0"],
             "error: cannot read the options file \(missing): no such file or directory"),
            (["desktop", "--options", "/dev/zero", "--relay-port", "0", "--proximity-port", "0"],
             "error: cannot read the options file /dev/zero: larger than 16 MiB"),
            (["inspect", missing], "error: cannot read \(missing): no such file or directory"),
            (["rp", "--profile", "/dev/zero", "--port", "0"], "error: cannot read the profile /dev/zero: larger than 16 MiB"),
            (["rp", "--profile", directory, "--port", "0"], "error: cannot read the profile \(directory): it is a directory"),
            (["inspect", directory], "error: cannot read \(directory): it is a directory"),
            // A named pipe nobody writes to: an error after the quiet limit (10 s), not a program
            // held in open(2) or read(2) (InputFileTests times the shorter limits).
            (["desktop", "--options", pipe, "--relay-port", "0", "--proximity-port", "0"],
             "error: cannot read the options file \(pipe): no data for 10 s (a pipe or device nobody writes to?)"),
        ] {
            try await FailureOutput.expect(lab, arguments, status: 2, line: message)
        }
    }

    @Test("options whose RP ID a browser would not accept as written (upper case, non-ASCII; a URL or a port): exit 2 saying how to write it, not a message contradicting itself")
    func rpIdAsWritten() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        // The form to write is given (punycode, lower case), with or without --origin (with one, the
        // origin check's "not valid for origin https://xn--…" contradicted itself), and a --rp-id
        // naming the same host in the other form is no contradiction.
        for (rpId, ascii) in [("MY.Example", "my.example"), ("bücher.example", "xn--bcher-kva.example")] {
            let file = lab.file("options-\(rpId.count).json")
            try #"{"challenge": "AQIDBA", "rpId": "\#(rpId)"}"#.write(toFile: file, atomically: true, encoding: .utf8)
            for extra in [[], ["--origin", "https://\(rpId)"], ["--rp-id", ascii]] {
                _ = try await FailureOutput.expect(
                    lab, ["desktop", "--options", file, "--relay-port", "0", "--proximity-port", "0"] + extra, status: 2,
                    line: "error: RP ID \(rpId) is not one a browser accepts: it is compared with the origin's host, which is lower case (and punycode for other letters); write it \(ascii)")
            }
        }
        // A URL or a port is not a host name: said of the member, not an origin made from it ("https://https://…").
        let user = #""user": {"id": "AQID", "name": "alice"}, "pubKeyCredParams": []"#
        for (request, json, member) in [
            ("mc", #"{"challenge": "AQIDBA", "rp": {"id": "https://example.com"}, \#(user)}"#, #"rp.id "https://example.com""#),
            ("ga", #"{"publicKey": {"challenge": "AQIDBA", "rpId": "example.com:443"}}"#, #"publicKey.rpId "example.com:443""#),
        ] {
            let file = lab.file("options-\(request).json")
            try json.write(toFile: file, atomically: true, encoding: .utf8)
            let kind = request == "mc" ? "PublicKeyCredentialCreationOptionsJSON (--request mc)" : "PublicKeyCredentialRequestOptionsJSON (--request ga)"
            _ = try await FailureOutput.expect(
                lab, ["desktop", "--request", request, "--options", file, "--relay-port", "0", "--proximity-port", "0"], status: 2,
                line: "error: \(file) is not valid \(kind): invalid value: \(member) is not a host name such as example.com: it holds \":\" (an RP ID is a domain: no scheme, port, user or path)")
        }
    }

    @Test("foreign options without --origin: a note says the origin was made from the RP ID and how to check it as a browser does")
    func derivedOriginNote() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let file = lab.file("options.json")
        try #"{"challenge": "AQIDBA", "rpId": "my.example"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let desktop = try lab.start(
            "desktop", ["desktop", "--options", file, "--relay-port", "0", "--proximity-port", "0", "--timeout", "1"])
        _ = try await desktop.waitForExit()
        #expect(
            desktop.standardError.text.contains(
                "note: the origin https://my.example is made from the RP ID (no --origin); give --origin with your relying party's page origin"),
            "\(desktop.transcript)")
        let given = try lab.start(
            "desktop", ["desktop", "--options", file, "--origin", "https://login.my.example", "--relay-port", "0", "--proximity-port", "0",
                        "--timeout", "1"])
        _ = try await given.waitForExit()
        #expect(!given.standardError.text.contains("is made from the RP ID"), "\(given.transcript)")

        // Registration options asking for a platform authenticator: said, the phone answers anyway.
        let platform = lab.file("platform.json")
        try #"{"challenge": "AQIDBA", "rp": {"id": "my.example", "name": "My"}, "user": {"id": "AQID", "name": "a"}, "pubKeyCredParams": [{"type": "public-key", "alg": -7}], "authenticatorSelection": {"authenticatorAttachment": "platform"}}"#
            .write(toFile: platform, atomically: true, encoding: .utf8)
        let registration = try lab.start(
            "desktop", ["desktop", "--request", "mc", "--options", platform, "--relay-port", "0", "--proximity-port", "0", "--timeout", "1"])
        _ = try await registration.waitForExit()
        #expect(
            registration.standardError.text.contains("note: the options ask for a platform authenticator (authenticatorAttachment \"platform\")"),
            "\(registration.transcript)")
    }

    @Test("rp with an unknown profile, serving or printing it: one error line, exit 2")
    func rpUnknownProfile() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        for extra in [["--port", "0"], ["--print-profile"]] {
            let rp = try lab.start("rp", ["rp", "--profile", "nope"] + extra)
            #expect(try await rp.waitForExit() == 2, "\(rp.transcript)")
            #expect(FailureOutput.singleErrorLine(rp).hasPrefix("error: unknown relying-party profile nope: use one of "))
        }
        // A relying party whose options are read, not served, says where it fits instead.
        let forgeRock = try lab.start("rp", ["rp", "--profile", "forgerock", "--port", "0"])
        #expect(try await forgeRock.waitForExit() == 2, "\(forgeRock.transcript)")
        #expect(FailureOutput.singleErrorLine(forgeRock).hasSuffix(
            "(ForgeRock AM answers inside an authentication tree: it has no endpoint profile; give its callbacks document to desktop --options)"),
                "\(forgeRock.transcript)")
        // `-` is standard input, as for every file read whole.
        let printed = try lab.start("print", ["rp", "--profile", "hanko", "--print-profile"])
        #expect(try await printed.waitForExit() == 0, "\(printed.transcript)")
        let piped = try lab.start(
            "piped", ["rp", "--profile", "-", "--print-profile"], standardInput: .piped(Array(printed.standardOutput.text.utf8)))
        #expect(try await piped.waitForExit() == 0, "\(piped.transcript)")
        #expect(piped.standardOutput.text.contains("\"/registration_initialize?user_name={user}\""), "\(piped.transcript)")
    }

    @Test("rp --origin: a trailing slash and upper case are dropped, and the ready line shows the origin")
    func rpOrigin() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let rp = try lab.start("rp", ["rp", "--profile", "hanko", "--port", "0", "--origin", "HTTPS://Login.Example.com/"])
        defer { rp.terminate() }
        let lines = try await rp.waitForOutput("ready line") { $0.contains { $0.contains(" listening on http://127.0.0.1:") } }
        #expect(lines.contains { $0.hasSuffix(" for example.com (origin https://login.example.com)") }, "\(lines)")
    }
}
