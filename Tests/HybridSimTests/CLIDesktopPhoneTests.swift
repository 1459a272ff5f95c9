import Foundation
import HybridCore
import HybridSim
import Testing

/// `hybrid-sim desktop` and `hybrid-sim phone` as processes: help text, command-line errors
/// (exit 64) and bad input found before any network traffic (exit 2).
@Suite("CLI: desktop and phone arguments (processes)")
struct CLIDesktopPhoneTests {
    private func run(
        _ arguments: [String],
        timeout: Duration = .seconds(15)
    ) async throws -> (Int32, ChildProcess, EndToEndLab) {
        let lab = try EndToEndLab()
        let process = try lab.start(arguments.first ?? "hybrid-sim", arguments)
        let status = try await process.waitForExit(timeout: timeout)
        return (status, process, lab)
    }

    @Test("hybrid-sim --version prints the version on stdout, exit 0")
    func version() async throws {
        let (status, process, lab) = try await run(["--version"])
        defer { lab.tearDown() }
        #expect(status == 0, "\(process.transcript)")
        #expect(process.standardOutput.text == HybridSimVersion.description + "\n", "\(process.transcript)")
        #expect(HybridSimVersion.number.split(separator: ".").compactMap { Int($0) }.count == 3)
    }

    @Test("desktop --help names every flag with its default")
    func desktopHelp() async throws {
        let (status, process, lab) = try await run(["desktop", "--help"])
        defer { lab.tearDown() }
        #expect(status == 0)
        let help = process.standardOutput.text.replacingOccurrences(of: "\n", with: " ")
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        for fragment in [
            "--request <mc|ga>", "default: ga)", "--rp-id", "example.com", "--origin", "https://<rp-id>", "--user",
            "alice",
            "--options", "--rp-store", "HYBRID_SIM_HOME", "--relay <ws://host:port>", "--relay-port", "47001",
            "--proximity-port", "47002", "--min-rssi", "(default: -70)", "--qr-png", "--invert", "--json", "--timeout",
            "120",
            "--log-level", "default: warning)", "values: trace, debug, info, notice, warning, error, critical",
        ] {
            #expect(help.contains(fragment), "missing \(fragment) in\n\(help)")
        }
    }

    @Test("phone --help names every flag with its default")
    func phoneHelp() async throws {
        let (status, process, lab) = try await run(["phone", "--help"])
        defer { lab.tearDown() }
        #expect(status == 0)
        let help = process.standardOutput.text.replacingOccurrences(of: "\n", with: " ")
            .split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        for fragment in [
            "--qr <FIDO:/…>", "--scan <file>", "--relay <ws://host:port>", "(default: ws://127.0.0.1:47001)",
            "--proximity <udp://host:port>", "(default: udp://127.0.0.1:47002)", "--rssi <dBm>", "(default: -45)",
            "--store",
            "--account", "--deny", "--attestation <none|packed|packed-x5c>", "--attestation-root-out <file>", "default: none)", "--json", "--timeout",
            "(default: 120)",
            "--log-level",
        ] {
            #expect(help.contains(fragment), "missing \(fragment) in\n\(help)")
        }
    }

    @Test(
        "command-line mistakes exit 64 with a message",
        arguments: [
            (["phone"], "--qr"),
            (["phone", "--qr", "FIDO:/1", "--scan", "x.png"], "cannot be combined"),
            (["phone", "--qr", "FIDO:/1", "--relay", "http://example.com"], "--relay"),
            (["phone", "--qr", "FIDO:/1", "--proximity", "udp://10.0.0.1:47002"], "loopback"),
            (["phone", "--qr", "FIDO:/1", "--rssi", "-200"], "--rssi"),
            (["phone", "--qr", "FIDO:/1", "--attestation", "basic"], "--attestation"),
            (["desktop", "--request", "xx"], "--request"),
            (["desktop", "--user", "bob", "--options", "o.json"], "--user cannot be combined with --options"),
            (["desktop", "--rp-url", "http://127.0.0.1:1"], "--rp-url needs --rp-profile"),
            (["desktop", "--rp-url", "ftp://x", "--rp-profile", "hanko"], "is not an http:// or https:// URL"),
            (["desktop", "--rp-profile", "hanko"], "--rp-profile needs --rp-url"),
            (["desktop", "--user-id-encoding", "hex"], "--user-id-encoding"),
            (["desktop", "--relay", "ws://127.0.0.1:1", "--relay-port", "0"], "--relay-port"),
            (["desktop", "--timeout", "0"], "--timeout"),
            (["phone", "--qr", "FIDO:/1", "--timeout", "0.0001"], "--timeout 0.0001 rounds to 0 milliseconds (it is kept in whole milliseconds): give 0.001 seconds or more"),
            (["desktop", "--origin", "example.com"], "--origin"),
            // rp's values are usage errors too, as desktop's are.
            (["rp", "--profile", "hanko", "--port", "99999"], "--port must be 0…65535"),
            (["rp", "--profile", "hanko", "--rp-id", "https://example.com"], "--rp-id https://example.com is not a host name"),
            (["rp", "--profile", "hanko", "--origin", "https://example.com/login"], "--origin https://example.com/login is not a web origin such as https://example.com"),
            (["rp", "--profile", "hanko", "--origin", "https://evil.example"], "--origin https://evil.example does not go with --rp-id example.com"),
            (["desktop", "--origin", "https://example.com/?q=1"], "--origin https://example.com/?q=1 is not a web origin"),
            (["desktop", "--origin", "https://example.com#top"], "--origin https://example.com#top is not a web origin"),
            // A fully qualified name copied whole: another origin to a relying party; --rp-id refuses it too.
            (["desktop", "--origin", "https://Example.COM.:8443/"], "--origin https://example.com.:8443 has a host ending in a dot, which a relying party comparing origins exactly takes for another origin than https://example.com:8443, and --rp-id refuses such a host; write https://example.com:8443"),
            (["rp", "--profile", "hanko", "--rp-id", "example.com", "--origin", "https://example.com."], "--origin https://example.com. has a host ending in a dot"),
            (["desktop", "--rp-id", "example.com."], "--rp-id example.com. is not a host name"),
            (["desktop", "--min-rssi", "-300"], "--min-rssi"),
            (["relay", "--routing-id-prefix", "0"], "--routing-id-prefix must be 2 or 4 hex digits"),
            (["relay", "--routing-id-prefix", "0A1"], "--routing-id-prefix must be 2 or 4 hex digits"),
            (["relay", "--routing-id-prefix", "0A1B2C"], "--routing-id-prefix must be 2 or 4 hex digits"),
            (["relay", "--routing-id-prefix", "zz"], "--routing-id-prefix must be 2 or 4 hex digits"),
            (["relay", "--allow-origin", ""], "--allow-origin '': give an origin as a browser sends it"),
            (["relay", "--allow-origin", "http://[0:0::1]:8080"], "--allow-origin 'http://[0:0::1]:8080' never matches: a browser sends this origin as http://[::1]:8080"),
            (["rp", "--profile", "hanko", "--rp-id", "127.0.0.1"], "--rp-id 127.0.0.1 is an IP address"),
            (["relay", "--allow-origin", "ci.example.org"], "--allow-origin 'ci.example.org' has no scheme, and a browser's Origin always has one: give https://ci.example.org"),
            (["relay", "--allow-origin", "https://ci.example.org/login"], "--allow-origin 'https://ci.example.org/login' is not an origin a browser sends (scheme://host[:port], no path, query or user): give it as https://ci.example.org\n"),
            (["relay", "--allow-origin", "https://u@CI.example.org:8443/x?y"], "give it as https://ci.example.org:8443\n"),
            (["desktop", "--rp-url", "http://127.0.0.1:1/s/base#frag", "--rp-profile", "okta"], "--rp-url http://127.0.0.1:1/s/base#frag has a fragment (#…), which is never sent to a server"),
            (["desktop", "--rp-url", "http://u:secret@127.0.0.1:1/s", "--rp-profile", "okta"], "--rp-url http://u:***@127.0.0.1:1/s holds a user name or password"),
            (["relay", "--max-connections", "1"], "--max-connections must be at least 2: a tunnel is two connections, the phone's and the desktop's"),
            (["relay", "--contacts", ""], "--contacts needs a file name\nUsage: hybrid-sim relay"),
            (["bench", "relay", "--url", "ws://127.0.0.1:47001/cable"], "--url ws://127.0.0.1:47001/cable has a path: give the relay's base URL"),
            (["bench", "relay", "--relay-pid", "12,x"], "--relay-pid must be one or more process IDs"),
            (["bench", "relay", "--tunnels", "0"], "--tunnels must be 1...9900"),
            (["bench", "relay", "--tunnels", "9901"], "--tunnels must be 1...9900"),
            (["relay", "--max-pending-upgrades=-1"], "--max-pending-upgrades must be 0 (no cap) or more"),
            (["relay", "--max-waiting-tunnels-per-source=-2"], "--max-waiting-tunnels-per-source must be 0 (no cap) or more"),
            (["bench", "hostile", "--hostile", "0"], "--hostile must be 1...15000"),
            (["demo", "--web-port", "8080"], "--web-port needs --web"),
            (["desktop", "--web-port", "8080"], "--web-port needs --web"),
            (["demo", "--web-wait", "5"], "--web-wait needs --web"),
            (["demo", "--web-linger", "5"], "--web-linger needs --web"),
            (["demo", "--web", "--json"], "--json and --web cannot be combined (the page is built from the demo's plain output)"),
            (["demo", "--web", "--web-wait", "3601"], "--web-wait must be 0...3600 seconds"),
            (["demo", "--web", "--web-wait", "-1"], "--web-wait must be 0...3600 seconds"),
            (["bench", "hostile", "--url", "ws://10.1.1.1:1"], "--url must be an IPv4 loopback relay (attackers connect from 127.0.0.2…254)\nUsage: hybrid-sim bench hostile"),
            (["relay", "--record", "/nonexistent-record-dir"], "--record /nonexistent-record-dir: not an existing directory\nUsage: hybrid-sim relay"),
            (["demo", "--timeout", "0"], "--timeout must be more than 0 and at most 3600 seconds"),
            (["relay", "--tunnel-lifetime", "0"], "--tunnel-lifetime must be a number of seconds above 0 and at most 86400"),
            (["demo", "--user", ""], "--user must be 1…1024 bytes of UTF-8"),
            (["demo", "--user", String(repeating: "ë", count: 513)], "--user must be 1…1024 bytes of UTF-8"),
            (["demo", "--rp-id", "bad id"], "--rp-id bad id is not a host name such as example.com"),
            // rp would listen with an RP ID no browser origin matches: refused with the form to write.
            (["rp", "--profile", "hanko", "--rp-id", "bücher.example"], "--rp-id: RP ID bücher.example is not one a browser accepts: it is compared with the origin's host, which is lower case (and punycode for other letters); write it xn--bcher-kva.example"),
            (["rp", "--profile", "hanko", "--rp-id", "Example.com", "--origin", "https://example.com"], "write it example.com"),
            // A negative number after a numeric flag is its value (not a flag), so the range check
            // answers instead of "Missing value".
            (["relay", "--idle-timeout", "-1"], "--idle-timeout must be a number of seconds above 0 and at most 86400"),
            (["relay", "--max-pending-upgrades", "-1"], "--max-pending-upgrades must be 0 (no cap) or more"),
            // 0.0004 s busy-looped before the minimum; the grace cannot be negative or past a day.
            (["relay", "--status-interval", "0.05"], "--status-interval must be 0.1 to 86400 seconds"),
            (["relay", "--status-interval", "nan"], "--status-interval must be 0.1 to 86400 seconds"),
            (["relay", "--contact-grace", "-1"], "--contact-grace must be 0 (none) to 86400 seconds"),
            (["relay", "--contact-grace", "86401"], "--contact-grace must be 0 (none) to 86400 seconds"),
            (["bench", "--count", "-1"], "--count must be at least 1"),
            (["desktop", "--relay-port", "-1"], "--relay-port must be 0…65535"),
            (["phone", "--listen", "--listen-timeout", "-1"], "--listen-timeout must be more than 0"),
            // Not a finite number of seconds: refused, not a trap converting it to a Duration.
            (["phone", "--qr", "FIDO:/1", "--timeout", "nan"], "--timeout must be more than 0 and at most 3600 seconds"),
            (["phone", "--listen", "--timeout", "1e300"], "--timeout must be more than 0 and at most 3600 seconds"),
            (["phone", "--listen", "--listen-timeout", "nan"], "--listen-timeout must be more than 0 and at most 86400 seconds"),
            (["phone", "--listen", "--listen-timeout", "inf"], "--listen-timeout must be more than 0 and at most 86400 seconds"),
            (["desktop", "--timeout", "nan"], "--timeout must be more than 0 and at most 3600 seconds"),
            (["phone", "--unlink", "--count", "1"], "--count and --listen-timeout need --listen"),
            (["inspect", "-", "--keylog", "-"], "the recording and --keylog cannot both be standard input (-)"),
            (["phone", "--unlink", "--deny"], "--account and --deny answer requests; --unlink answers none"),
            (["phone", "--unlink", "--account", "alice"], "--account and --deny answer requests; --unlink answers none"),
            (["phone", "--unlink", "--rssi", "-40"], "--proximity, --rssi, --timeout, --attestation and --keylog apply to transactions; --unlink runs none"),
            (["phone", "--unlink", "--timeout", "5"], "--proximity, --rssi, --timeout, --attestation and --keylog apply to transactions; --unlink runs none"),
            (["phone", "--unlink", "--proximity", "udp://127.0.0.1:1"], "--proximity, --rssi, --timeout, --attestation and --keylog apply to transactions"),
            (["phone", "--unlink", "--attestation", "packed"], "--attestation and --keylog apply to transactions; --unlink runs none"),
            (["phone", "--unlink", "--keylog", "/tmp/k.log"], "--attestation and --keylog apply to transactions; --unlink runs none"),
            (["phone", "--unlink", "--relay", "http://x"], "--relay http://x must look like ws://127.0.0.1:47001"),
            (["phone", "--unlink", "--relay", "wss://127.0.0.1:47001"], "--relay wss://127.0.0.1:47001: wss:// (TLS) is not supported, the relay is a loopback simulator"),
            (["phone", "--unlink", "--relay", "ws://127.0.0.1:47001/cable"], "--relay ws://127.0.0.1:47001/cable has a path: give the relay's base URL"),
            // --listen's transactions take the QR flow's checks (they were not checked before).
            (["phone", "--listen", "--timeout", "-1"], "--timeout must be more than 0 and at most 3600 seconds"),
            (["phone", "--listen", "--rssi", "30"], "--rssi must be -127…20 dBm"),
            (["relay", "--idle-timeout", "--port", "5"], "The value '--port' is invalid for '--idle-timeout <seconds>'"),
            (["bench", "relay", "--url", "http://127.0.0.1:1"], "--url http://127.0.0.1:1: invalid tunnel URL"),
        ]
    )
    func usageErrors(arguments: [String], mention: String) async throws {
        let (status, process, lab) = try await run(arguments)
        defer { lab.tearDown() }
        #expect(status == ProgramFailure.usageExitCode, "\(process.transcript)")
        #expect(process.standardError.text.contains(mention), "\(process.transcript)")
    }

    @Test("'-' with standard input on a terminal is refused at once, not read until the user types (script(1) gives it a pseudo-terminal)")
    func standardInputTerminal() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "util-linux's script(1) makes the terminal")
        // -e: script exits with the command's status; its output is the terminal's, so \r\n.
        let process = try lab.startOther("qr scan - on a terminal", ["script", "-qec", "\(binary) qr scan -", "/dev/null"])
        #expect(try await process.waitForExit(timeout: .seconds(20)) == 1, "\(process.transcript)")
        #expect(
            process.standardOutput.text.contains(
                "error: file unreadable: standard input: standard input is a terminal; pipe or redirect the data in"),
            "\(process.transcript)")
    }

    @Test("qr show on a terminal narrower than the art says so after it, naming its --png file, as the desktop does")
    func qrShowNarrowTerminal() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let binary = try HybridSimBinary.url().path
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "util-linux's script(1) makes the terminal")
        let url = "FIDO:/" + String(repeating: "0", count: 17) + "1"  // any text: --raw
        let png = lab.file("code.png")
        let process = try lab.startOther(
            "qr show on a 30-column terminal", ["script", "-qec", "stty cols 30; env -u TMUX LC_ALL=C.UTF-8 '\(binary)' qr show --raw \(url) --png '\(png)'", "/dev/null"])
        #expect(try await process.waitForExit(timeout: .seconds(20)) == 0, "\(process.transcript)")
        let notes = process.standardOutput.text.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("note: ") }
        #expect(notes.count == 1 && notes[0].hasPrefix("note: the terminal is 30 columns wide and the QR code needs ")
            && notes[0].hasSuffix("or scan the PNG (phone --scan \(png)) or use the FIDO:/ line (phone --qr)"), "\(process.transcript)")
        // Not a terminal: no note.
        let (status, piped, pipedLab) = try await run(["qr", "show", "--raw", url])
        defer { pipedLab.tearDown() }
        #expect(status == 0 && piped.standardError.text.isEmpty, "\(piped.transcript)")
    }

    @Test("desktop --relay with nothing listening there: a note at the start, and the timeout names the relay, not only the phone")
    func externalRelayDown() async throws {
        let (holder, port) = try EndToEndLab.boundSocket(listening: false)
        defer { close(holder) }
        let (status, process, lab) = try await run(
            ["desktop", "--relay", "ws://127.0.0.1:\(port)", "--proximity-port", "0", "--timeout", "1"])
        defer { lab.tearDown() }
        #expect(status == 3, "\(process.transcript)")
        #expect(
            process.standardError.lines.contains(
                "note: nothing accepts connections at ws://127.0.0.1:\(port) yet; a phone cannot open its tunnel there until a relay runs"),
            "\(process.transcript)")
        #expect(
            process.standardError.lines.last?.hasSuffix(
                "; and nothing accepts connections at the relay ws://127.0.0.1:\(port), so no phone could open its tunnel (is --relay right?)")
                == true, "\(process.transcript)")
    }

    @Test("qr failures are one `error:` line like every other command's, exit 1")
    func qrErrorLine() async throws {
        let (status, process, lab) = try await run(["qr", "scan", "/nonexistent-qr.png"])
        defer { lab.tearDown() }
        #expect(status == 1, "\(process.transcript)")
        #expect(process.standardError.lines == ["error: file unreadable: /nonexistent-qr.png: no such file or directory"], "\(process.transcript)")
        let (shown, show, showLab) = try await run(["qr", "show", "--raw", "hi", "--png", "/nonexistent-qr-dir/x.png"])
        defer { showLab.tearDown() }
        #expect(shown == 1, "\(show.transcript)")
        #expect(
            show.standardError.lines == ["error: could not write file: /nonexistent-qr-dir/x.png: the directory /nonexistent-qr-dir does not exist"],
            "\(show.transcript)")
        #expect(show.standardOutput.text.isEmpty, "files first: no code printed when one cannot be written")
    }

    @Test("qr scan - and phone --scan - read standard input within the file limits: a directory is an error line (it trapped), a piped code scans")
    func scanStandardInput() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let directory = FileManager.default.temporaryDirectory.path
        for arguments in [["qr", "scan", "-"], ["qr", "scan", "--raw", "-"]] {
            let scan = try lab.start("qr", arguments, standardInput: .file(directory))
            #expect(try await scan.waitForExit() == 1, "\(scan.transcript)")
            #expect(scan.standardError.lines == ["error: file unreadable: standard input: it is a directory"], "\(scan.transcript)")
        }
        let png = lab.file("code.png")
        let show = try lab.start("qr", ["qr", "show", "--raw", "hello from a pipe", "--png", png])
        #expect(try await show.waitForExit() == 0, "\(show.transcript)")
        let pngBytes = try Array(Data(contentsOf: URL(fileURLWithPath: png)))
        let piped = try lab.start("qr", ["qr", "scan", "--raw", "-"], standardInput: .piped(pngBytes))
        #expect(try await piped.waitForExit() == 0, "\(piped.transcript)")
        #expect(piped.standardOutput.lines == ["hello from a pipe"], "\(piped.transcript)")
        // A malformed PGM names its file, as a PNG's error does.
        let pgm = lab.file("bad.pgm")
        try Data("P5\n1 1\n70000\n\u{0}".utf8).write(to: URL(fileURLWithPath: pgm))
        let badPGM = try lab.start("qr", ["qr", "scan", pgm])
        #expect(try await badPGM.waitForExit() == 1, "\(badPGM.transcript)")
        #expect(FailureOutput.singleErrorLine(badPGM).contains("\(pgm): "), "\(badPGM.transcript)")
        // The phone reads a scanned code the same way (a code that is no FIDO:/ URL: bad input, exit 2).
        let phone = try lab.start("phone", ["phone", "--scan", "-"], standardInput: .piped(pngBytes))
        #expect(try await phone.waitForExit() == 2, "\(phone.transcript)")
        #expect(FailureOutput.singleErrorLine(phone).hasSuffix("it is not a FIDO:/ URL: the code holds \"hello from a pipe\""),
                "it read the piped code: \(phone.transcript)")
    }

    @Test("qr scan of a capture holding two different FIDO:/ codes prints the newest and says there were two, as phone --scan does")
    func scanTwoCodes() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let urls = [ClientSession(requestType: .makeCredential, timestamp: 1).url, ClientSession(requestType: .getAssertion, timestamp: 2).url]
        var capture = ""
        for url in urls {
            let show = try lab.start("show", ["qr", "show", url])
            #expect(try await show.waitForExit() == 0, "\(show.transcript)")
            capture += show.standardOutput.text + "log line\n"
        }
        let file = lab.file("two.txt")
        try capture.write(toFile: file, atomically: true, encoding: .utf8)
        let scan = try lab.start("scan", ["qr", "scan", file])
        #expect(try await scan.waitForExit() == 0, "\(scan.transcript)")
        #expect(scan.standardOutput.lines == [urls[1]], "\(scan.transcript)")
        #expect(scan.standardError.lines == ["note: \(file) holds 2 different FIDO:/ codes; using the lowest readable one (the newest), \(urls[1].prefix(18))…"],
                "\(scan.transcript)")
    }

    @Test("bench --json says how it ran: loops, executor, start time and units beside the machine")
    func benchJSONDescribesItself() async throws {
        let (status, process, lab) = try await run(["bench", "--count", "2", "--warmup", "0", "--json"], timeout: .seconds(60))
        defer { lab.tearDown() }
        #expect(status == 0, "\(process.transcript)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(process.standardOutput.text.utf8)) as? [String: Any])
        #expect(report["loops"] as? String == "one")
        #expect(report["executor"] as? String == "nio")
        #expect((report["startedAt"] as? String)?.hasSuffix("Z") == true)
        #expect((report["units"] as? String)?.hasPrefix("times in milliseconds") == true)
        #expect(report["machine"] is [String: Any])
    }

    @Test("negative RSSI values parse as values (--rssi -60, --min-rssi -80)")
    func negativeNumbers() async throws {
        let (status, process, lab) = try await run(["phone", "--qr", "FIDO:/123", "--rssi", "-60"])
        defer { lab.tearDown() }
        #expect(status == 2, "parsed, then the QR text is refused: \(process.transcript)")
    }

    @Test("a bad QR code is bad input (exit 2) before any network traffic")
    func badQR() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let text = lab.file("not-a-qr.txt")
        try "hello\n".write(toFile: text, atomically: true, encoding: .utf8)
        for (arguments, message) in [
            (["phone", "--qr", "FIDO:/123"], "error: --qr is not a valid FIDO:/ URL:"),
            (
                ["phone", "--scan", lab.file("missing.png")],
                "error: cannot read a FIDO:/ QR code from \(lab.file("missing.png")):"
            ),
            (["phone", "--scan", text], "error: cannot read a FIDO:/ QR code from \(text):"),
        ] {
            let phone = try lab.start("phone", arguments)
            #expect(try await phone.waitForExit(timeout: .seconds(10)) == 2, "\(phone.transcript)")
            #expect(FailureOutput.singleErrorLine(phone).hasPrefix(message), "\(phone.transcript)")
        }
        // A paste cut short says so.
        let cut = try lab.start("phone", ["phone", "--qr", "FIDO:/123"])
        #expect(try await cut.waitForExit(timeout: .seconds(10)) == 2, "\(cut.transcript)")
        #expect(FailureOutput.singleErrorLine(cut).hasSuffix("(3 digits after FIDO:/, where a desktop's code has about 170: was the paste cut short?)"),
                "\(cut.transcript)")
        // A URL a terminal wrapped (line breaks and an indent between its digits) is read: the phone
        // goes on to the relay (none here: exit 6), not a bad URL.
        let url = ClientSession(requestType: .getAssertion, timestamp: 1).url
        let wrapped = String(url.prefix(50)) + "\n  " + String(url.dropFirst(50).prefix(60)) + "\r\n" + String(url.dropFirst(110))
        let relayPort = try EndToEndLab.closedPort()
        let phone = try lab.start("phone", ["phone", "--qr", wrapped, "--relay", "ws://127.0.0.1:\(relayPort)", "--timeout", "5"])
        #expect(try await phone.waitForExit(timeout: .seconds(20)) == 6, "\(phone.transcript)")
        #expect(!phone.standardError.text.contains("not a valid FIDO:/ URL"), "\(phone.transcript)")
    }

    @Test("the code in HYBRID_SIM_QR when neither --qr nor --scan is given: read (named in its errors), the flags win over it, and without any a usage error names all three")
    func codeInTheEnvironment() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let bad = try lab.start("phone", ["phone"], environment: ["HYBRID_SIM_QR": "FIDO:/123"])
        #expect(try await bad.waitForExit(timeout: .seconds(10)) == 2, "\(bad.transcript)")
        #expect(FailureOutput.singleErrorLine(bad).hasPrefix("error: HYBRID_SIM_QR is not a valid FIDO:/ URL:"), "\(bad.transcript)")
        // A good one is read: the phone goes on to the relay (none here: exit 6).
        let url = ClientSession(requestType: .getAssertion, timestamp: 1).url
        let relay = "ws://127.0.0.1:\(try EndToEndLab.closedPort())"
        let good = try lab.start("phone", ["phone", "--relay", relay, "--timeout", "5"], environment: ["HYBRID_SIM_QR": url])
        #expect(try await good.waitForExit(timeout: .seconds(20)) == 6, "\(good.transcript)")
        #expect(good.standardError.lines.contains { $0.hasPrefix("QR for a sign-in request (ga); connecting to relay") }, "\(good.transcript)")
        // --qr wins over a stale variable.
        let flag = try lab.start("phone", ["phone", "--qr", "FIDO:/45"], environment: ["HYBRID_SIM_QR": url])
        #expect(try await flag.waitForExit(timeout: .seconds(10)) == 2, "\(flag.transcript)")
        #expect(FailureOutput.singleErrorLine(flag).hasPrefix("error: --qr is not a valid FIDO:/ URL:"), "\(flag.transcript)")
        // Neither: the usage error names the variable too (an empty one counts as none).
        let none = try lab.start("phone", ["phone"], environment: ["HYBRID_SIM_QR": ""])
        #expect(try await none.waitForExit(timeout: .seconds(10)) == 64, "\(none.transcript)")
        #expect(none.standardError.text.contains("give the QR code with --qr 'FIDO:/…', --scan FILE or HYBRID_SIM_QR=FIDO:/… (or --listen, --unlink)"),
                "\(none.transcript)")
    }

    @Test("a bad options file is bad input (exit 2), before any QR code is shown")
    func badOptions() async throws {
        let lab = try EndToEndLab()
        defer { lab.tearDown() }
        let noChallenge = lab.file("no-challenge.json")
        try #"{"rpId": "example.com"}"#.write(toFile: noChallenge, atomically: true, encoding: .utf8)
        let registrationOptions = OptionsFixtures.directory.appendingPathComponent(
            "simplewebauthn-registration-options.json"
        ).path
        let signInOptions = OptionsFixtures.directory.appendingPathComponent("simplewebauthn-authentication-options.json").path
        // Registration options whose user.id is a plain string (ForgeRock-style), not base64url.
        let plainUserId = lab.file("plain-user-id.json")
        try #"{"challenge":"AAECAwQFBgcICQoLDA0ODw","rp":{"id":"example.com","name":"Example"},"user":{"id":"alice@example.com","name":"alice","displayName":"Alice"},"pubKeyCredParams":[{"type":"public-key","alg":-7}]}"#
            .write(toFile: plainUserId, atomically: true, encoding: .utf8)
        // Registration options whose user.id is standard base64 (a server with the wrong alphabet).
        let standardUserId = lab.file("standard-user-id.json")
        try #"{"challenge":"AAECAwQFBgcICQoLDA0ODw","rp":{"id":"example.com","name":"Example"},"user":{"id":"+/8A","name":"alice","displayName":"Alice"},"pubKeyCredParams":[{"type":"public-key","alg":-7}]}"#
            .write(toFile: standardUserId, atomically: true, encoding: .utf8)
        // Registration options without ES256 (RS256 only): not valid for mc, and still not sign-in options.
        let rsaOnly = lab.file("rs256-only.json")
        try #"{"publicKey":{"challenge":"AAECAwQFBgcICQoLDA0ODw","rp":{"id":"example.org","name":"Example"},"user":{"id":"AQID","name":"alice","displayName":"Alice"},"pubKeyCredParams":[{"type":"public-key","alg":-257}]}}"#
            .write(toFile: rsaOnly, atomically: true, encoding: .utf8)
        // ES256 only under another type than "public-key": skipped as a browser skips it, said so.
        let foreignType = lab.file("foreign-type.json")
        try #"{"challenge":"AAECAwQFBgcICQoLDA0ODw","rp":{"id":"example.com"},"user":{"id":"AQID","name":"alice"},"pubKeyCredParams":[{"type":"foo","alg":-7}]}"#
            .write(toFile: foreignType, atomically: true, encoding: .utf8)
        // Valid options inside an envelope no relying-party library sends: not guessed at, its members named.
        let envelope = lab.file("envelope.json")
        let registrationText = try String(contentsOf: URL(fileURLWithPath: registrationOptions), encoding: .utf8)
        try #"{"status":"ok","data":\#(registrationText)}"#.write(toFile: envelope, atomically: true, encoding: .utf8)
        for (arguments, message) in [
            (
                ["--request", "mc", "--options", envelope],
                #"error: \#(envelope) is not valid PublicKeyCredentialCreationOptionsJSON (--request mc): not WebAuthn options: the document is neither bare options (no challenge, rp, user, rpId or allowCredentials at its top level) nor a recognised wrapper ({"publicKey": …}, {"options": …}, ForgeRock callbacks or their data); its top-level members are "data", "status""#
            ),
            (
                ["--request", "mc", "--options", foreignType],
                #"error: \#(foreignType) is not valid PublicKeyCredentialCreationOptionsJSON (--request mc): no ES256 in pubKeyCredParams: pubKeyCredParams[0].type "foo" is not "public-key", and a browser skips such entries (WebAuthn §5.1.3), so no public-key entry is left; the phone only makes public-key ES256 (-7) keys"#
            ),
            (["--options", plainUserId], "holds registration options (rp, user, pubKeyCredParams"),
            (["--request", "mc", "--options", standardUserId], "(it is standard base64, with + or /: the relying party should send base64url"),
            (["--options", rsaOnly], "error: \(rsaOnly) holds registration options (rp, user, pubKeyCredParams: "),
            (["--request", "mc", "--options", rsaOnly], "no ES256 in pubKeyCredParams"),
            (["--request", "mc", "--options", plainUserId], "(they parse when user.id is read as plain text, as Okta and ForgeRock send it: give --user-id-encoding utf8)"),
            // The wrong --request for the options: said so, not run as the other ceremony.
            (
                ["--options", registrationOptions],
                "error: \(registrationOptions) holds registration options (rp, user, pubKeyCredParams: PublicKeyCredentialCreationOptionsJSON), not sign-in options: give --request mc to register with them"
            ),
            (
                ["--request", "mc", "--options", signInOptions],
                "(they read as sign-in options: give --request ga to sign in with them)"
            ),
            (
                ["--options", lab.file("missing.json")],
                "error: cannot read the options file \(lab.file("missing.json"))"
            ),
            (
                ["--options", noChallenge],
                "error: \(noChallenge) is not valid PublicKeyCredentialRequestOptionsJSON (--request ga):"
            ),
            (["--request", "mc", "--options", noChallenge], "PublicKeyCredentialCreationOptionsJSON (--request mc)"),
            (
                ["--request", "mc", "--options", registrationOptions, "--rp-id", "other.example"],
                "error: --rp-id other.example contradicts the options' RP ID example.com"
            ),
            (
                ["--rp-id", "example.com", "--origin", "https://evil.example"],
                "error: RP ID example.com is not valid for origin https://evil.example"
            ),
            (
                ["--rp-id", "127.0.0.1", "--origin", "https://127.0.0.1"],
                "error: the origin https://127.0.0.1 has an IP address for its host, and a browser makes no WebAuthn request"
            ),
        ] {
            let desktop = try lab.start(
                "desktop",
                ["desktop", "--relay-port", "0", "--proximity-port", "0"] + arguments
            )
            #expect(try await desktop.waitForExit(timeout: .seconds(10)) == 2, "\(desktop.transcript)")
            #expect(FailureOutput.singleErrorLine(desktop).contains(message), "\(desktop.transcript)")
            #expect(desktop.standardOutput.text.isEmpty, "no QR code for bad input")
        }
        // Options of the other ceremony fetched from --rp-url: the profile's endpoint is wrong, not
        // --request (which chose the endpoint).
        let registrationBody = try String(contentsOfFile: registrationOptions, encoding: .utf8)
        let misrouted = try RelyingPartyClientFailureTests.serving { fd, _ in
            let answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(registrationBody.utf8.count)\r\nConnection: close\r\n\r\n" + registrationBody
            _ = Array(answer.utf8).withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        }
        defer { misrouted.stop() }
        let fetched = try lab.start(
            "desktop",
            ["desktop", "--relay-port", "0", "--proximity-port", "0", "--rp-url", "http://127.0.0.1:\(misrouted.port)", "--rp-profile", "simplewebauthn"])
        #expect(try await fetched.waitForExit(timeout: .seconds(10)) == 2, "\(fetched.transcript)")
        #expect(
            FailureOutput.singleErrorLine(fetched).hasSuffix(
                "not sign-in options: the relying party's sign-in endpoint sent them: check the --rp-profile's sign-in paths"),
            "\(fetched.transcript)")
        // No hint toward --request ga for registration options that fail as registration options.
        let rsa = try lab.start("desktop", ["desktop", "--relay-port", "0", "--proximity-port", "0", "--request", "mc", "--options", rsaOnly])
        #expect(try await rsa.waitForExit(timeout: .seconds(10)) == 2, "\(rsa.transcript)")
        #expect(!FailureOutput.singleErrorLine(rsa).contains("--request ga"), "\(rsa.transcript)")
        // `--options -` reads standard input (named so in the message), redirected from a file or piped.
        let registrationBytes = try Array(Data(contentsOf: URL(fileURLWithPath: registrationOptions)))
        for input in [ChildProcess.Input.file(registrationOptions), .piped(registrationBytes)] {
            let piped = try lab.start(
                "desktop", ["desktop", "--relay-port", "0", "--proximity-port", "0", "--options", "-"], standardInput: input)
            #expect(try await piped.waitForExit(timeout: .seconds(10)) == 2, "\(piped.transcript)")
            #expect(FailureOutput.singleErrorLine(piped).hasPrefix("error: standard input holds registration options"), "\(piped.transcript)")
        }
    }
}
