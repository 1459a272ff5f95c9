import Foundation
import HybridQR
import Testing

/// Real `tmux capture-pane -p` output of `hybrid-sim qr show` (Chrome URL), kept in `Captures/`:
/// `tmux-normal.txt` (plain capture: trailing spaces trimmed, prompt lines, the URL wrapped over
/// two lines) and `tmux-inverted-ansi.txt` (`--invert`, piped through colour codes, captured with
/// `-e` so the SGR escapes are in the file).
@Suite("Real tmux captures")
struct CaptureTests {
    /// `Tests/HybridQRTests/Captures/`, found next to this source file.
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Captures", isDirectory: true)

    @Test("each capture scans back to the Chrome URL and payload", arguments: ["tmux-normal.txt", "tmux-inverted-ansi.txt"])
    func capture(_ name: String) throws {
        let path = Self.directory.appendingPathComponent(name).path
        let scan = try QRScanner.scanFIDO(fileAt: path)
        #expect(scan.url == Fixtures.chromeURL)
        #expect(scan.payload.requestType == .makeCredential)
    }

    @Test("a capture that lost the top of the code (the visible window only, the code scrolled up) says how many art lines it found and what cuts a code short")
    func partialCodeSaysWhy() throws {
        let lines = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL)).split(separator: "\n", omittingEmptySubsequences: false)
        let bottom = lines.dropFirst(lines.count / 2).joined(separator: "\n")
        let art = bottom.split(separator: "\n").filter { $0.contains { "▀▄█".contains($0) } }.count
        let error = #expect(throws: QRError.self) { _ = try QRScanner.scanFIDO(text: "$ hybrid-sim desktop\n" + bottom + "\nwaiting…\n") }
        #expect(error?.code == .noQRCode)
        #expect(error?.reason.contains("its \(art) line(s) of QR art hold no complete code") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("tmux capture-pane -p without -S -") == true, "\(String(describing: error))")
    }

    @Test("a capture of a reused terminal (a registration code, then a sign-in code, log lines around them): the lowest, newest code is read and the other counted")
    func severalCodesNewestWins() throws {
        func art(_ url: String, inverted: Bool = false) throws -> String {
            TerminalArt.render(try QREncoder.encode(fidoURL: url), inverted: inverted)
        }
        let older = try art(Fixtures.chromeURL)
        let newer = try art(Fixtures.safariURL)
        let capture = "$ hybrid-sim desktop --request mc\n" + older + "\n" + Fixtures.chromeURL + "\nregistered\n"
            + "$ hybrid-sim desktop\n" + newer + "\n" + Fixtures.safariURL + "\nwaiting for the phone…\n"
        let scan = try QRScanner.scanFIDO(text: capture)
        #expect(scan.url == Fixtures.safariURL)
        #expect(scan.otherCodes == 1)
        #expect(try QRScanner.scan(text: capture) == Fixtures.safariURL)
        // The same code twice (the terminal scrolled a copy of it) is not another code.
        let twice = try QRScanner.scanFIDO(text: newer + "\nlog line\n" + newer)
        #expect(twice.url == Fixtures.safariURL && twice.otherCodes == 0)
        // Order decides, not size or polarity: the older code inverted and last is the one read.
        let reversed = try QRScanner.scanFIDO(text: newer + "\nlog line\n" + (try art(Fixtures.chromeURL, inverted: true)))
        #expect(reversed.url == Fixtures.chromeURL && reversed.otherCodes == 1)
        let single = try QRScanner.scanFIDO(text: newer)
        #expect(single.otherCodes == 0)
    }

    @Test("a capture with thousands of runs of block characters is searched in its newest 64 only: the code at the bottom is read, one above them is not")
    func artRunsBounded() throws {
        let code = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL), inverted: false)
        // Each "█▀█" line between log lines is a run of art that holds no symbol.
        let junk = String(repeating: "█▀█ █\nlog line\n", count: 2_000)
        #expect(try QRScanner.scanFIDO(text: junk + code).url == Fixtures.chromeURL)
        #expect(throws: QRError.self) { try QRScanner.scanFIDO(text: code + "\nlog line\n" + junk) }
    }

    @Test("a terminal session's typescript with control bytes in it (a backspace echoed over a typo, the SI that tput sgr0 writes, DEL) is text and scans; NUL bytes (UTF-16) are refused saying so")
    func typescriptControlBytes() throws {
        let art = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL))
        let typescript = "Script started\r\n$ ecjo\u{8}\u{8}\u{8}cho hi\u{7F}\r\n\u{1B}[1mu@h\u{1B}(B\u{1B}[m\u{0F}:~$ hybrid-sim desktop\r\n"
            + art.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n" + Fixtures.chromeURL + "\r\n"
        #expect(QRScanner.sniff(Array(typescript.utf8)) == .text)
        #expect(try QRScanner.scanFIDO(bytes: Array(typescript.utf8)).url == Fixtures.chromeURL)
        // A control byte inside an art line is dropped too: the line stays art.
        let lines = art.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let middle = lines.count / 2
        var marked = lines
        marked[middle] = marked[middle] + "\u{0F}"
        #expect(try QRScanner.scanFIDO(text: marked.joined(separator: "\n")).url == Fixtures.chromeURL)
        let utf16: [UInt8] = "hello █▀\n".utf16.flatMap { unit -> [UInt8] in [UInt8(unit & 0xFF), UInt8(unit >> 8)] }
        let ascii16: [UInt8] = "hello world\n".utf8.flatMap { byte -> [UInt8] in [byte, 0] }
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: ascii16) }
        #expect(error?.reason == "input: it holds NUL bytes, as UTF-16 text without a byte-order mark does: save the capture as UTF-8 (iconv -f UTF-16LE -t UTF-8)", "\(String(describing: error))")
        #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: utf16) }
    }

    @Test("the newest code cut short at the bottom of a capture: the older code above is read, and the scan says the newest could not be; a progress bar of blocks below a code is not taken for a code")
    func unreadableNewestCode() throws {
        let older = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL))
        let newer = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.safariURL))
        let cut = newer.split(separator: "\n", omittingEmptySubsequences: false).prefix(15).joined(separator: "\n")
        let scan = try QRScanner.scanFIDO(text: older + "\n" + Fixtures.chromeURL + "\n$ hybrid-sim desktop\n" + cut)
        #expect(scan.url == Fixtures.chromeURL)
        #expect(scan.unreadableNewerArt == 1 && scan.otherCodes == 0)
        #expect(
            scan.notes(about: "cap.txt") == [
                "the lowest QR art in cap.txt (the newest code) cannot be read, cut short or damaged; using a code above it, "
                    + "which may be an older desktop's: if this one is not answered, capture the newest code whole"
            ])
        let progress = try QRScanner.scanFIDO(text: newer + "\nuploading\n████████████░░░░ 75%\n")
        #expect(progress.url == Fixtures.safariURL && progress.unreadableNewerArt == 0 && progress.notes(about: "x").isEmpty)
    }

    @Test("art that cannot be read in a capture that holds the FIDO:/ line: the error says the line is the same code")
    func urlLineHint() throws {
        let mangled = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL))
            .replacingOccurrences(of: "█", with: "?").replacingOccurrences(of: "▀", with: "?").replacingOccurrences(of: "▄", with: "?")
        let error = #expect(throws: QRError(.noQRCode)) { try QRScanner.scanFIDO(text: mangled + "\n" + Fixtures.chromeURL + "\n") }
        #expect(error?.reason.hasSuffix("; the capture also holds a FIDO:/ line, the same code as text (phone --qr takes it)") == true,
                "\(String(describing: error))")
        let cut = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL)).split(separator: "\n").prefix(12).joined(separator: "\n")
        let partial = #expect(throws: QRError(.noQRCode)) { try QRScanner.scanFIDO(text: cut + "\n" + Fixtures.chromeURL + "\n") }
        #expect(partial?.reason.hasSuffix("(phone --qr takes it)") == true, "\(String(describing: partial))")
    }

    @Test("the plain capture really has its trailing spaces trimmed")
    func trimmed() throws {
        let text = try String(contentsOf: Self.directory.appendingPathComponent("tmux-normal.txt"), encoding: .utf8)
        #expect(!text.split(separator: "\n").contains { $0.hasSuffix(" ") })
    }
}
