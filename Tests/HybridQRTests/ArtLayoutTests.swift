import HybridQR
import Testing

/// Terminal art laid out in ways other encoders, terminals and copies produce: no quiet zone with
/// its trailing spaces trimmed, and lines that carry a prefix.
@Suite("Terminal art layouts")
struct ArtLayoutTests {
    @Test("inverted art without a quiet zone, trailing spaces trimmed (qr show --invert --quiet-zone 0, qrencode -t UTF8 -m 0): its trimmed tails are dark modules", arguments: [0, 1])
    func invertedWithoutQuietZone(variant: Int) throws {
        // A fresh payload whose art has trailing spaces to trim both ways (a random one may not:
        // about one in a few hundred ends every line with a dark cell, and tested nothing).
        func trims(_ matrix: QRMatrix) -> Bool {
            [true, false].allSatisfy { inverted in
                let full = TerminalArt.render(matrix, inverted: inverted, quietZone: 0)
                return Fixtures.strippingTrailingSpaces(full).count < full.count
            }
        }
        var url = Fixtures.chromeURL
        if variant == 1 {
            url = try #require((0..<50).lazy.map { _ in Fixtures.randomPayload(variant: 3).url }.first { url in
                (try? QREncoder.encode(fidoURL: url)).map(trims) ?? false
            })
        }
        let matrix = try QREncoder.encode(fidoURL: url)
        for inverted in [true, false] {
            let full = TerminalArt.render(matrix, inverted: inverted, quietZone: 0)
            let art = Fixtures.strippingTrailingSpaces(full)
            #expect(art.count < full.count, "the art must have lost trailing spaces")
            #expect(try QRScanner.scanFIDO(text: art).url == url, "inverted: \(inverted)")
        }
    }
}

extension ArtLayoutTests {
    /// Ways a tool puts something before or after every line of a capture.
    static let prefixes: [(name: String, wrap: @Sendable (Int, String) -> String)] = [
        ("docker compose logs", { _, line in "desktop-1  | " + line }),
        ("cat -n", { number, line in String(repeating: " ", count: 6 - String(number).count) + "\(number)\t" + line }),
        ("mail quote", { _, line in "> " + line }),
        ("tmux pane on the left", { _, line in "stuff │" + line }),
        ("tmux pane on the right", { _, line in line + " │ other pane" }),
        ("tab-indented paste", { _, line in "\t" + line }),
    ]

    @Test("art whose every line carries a prefix or a suffix (docker logs, cat -n, a > quote, a pane border, a tab) scans", arguments: 0..<6)
    func prefixedLines(index: Int) throws {
        let (name, wrap) = Self.prefixes[index]
        let matrix = try QREncoder.encode(fidoURL: Fixtures.chromeURL)
        for inverted in [false, true] {
            let lines = TerminalArt.render(matrix, inverted: inverted).split(separator: "\n", omittingEmptySubsequences: false)
            let capture = lines.enumerated().map { wrap($0.offset + 1, String($0.element)) }.joined(separator: "\n")
            for text in [capture, Fixtures.strippingTrailingSpaces(capture)] {
                #expect(try QRScanner.scanFIDO(text: "log line\n" + text + "\n" + Fixtures.chromeURL).url == Fixtures.chromeURL, "\(name), inverted: \(inverted)")
            }
        }
    }
}

extension ArtLayoutTests {
    @Test("a line of blocks wider than 1024 columns once its tabs are expanded (a hostile capture of millions of tabs) is skipped, and the error says so")
    func overWideLineSkipped() throws {
        for text in [String(repeating: "\t", count: 200_000) + "█", String(repeating: "x", count: 1025) + "█▀▄"] {
            do {
                _ = try QRScanner.scanFIDO(text: text)
                Issue.record("an over-wide line scanned")
            } catch {
                #expect(error.code == .noQRCode)
                #expect(error.reason.contains("1 line(s) with ▀ ▄ █ block characters are wider than 1024 columns"), "\(error.reason)")
            }
        }
    }

    @Test("art whose lines end in many tabs or spaces still scans: trailing blanks are trimmed before the width bound")
    func trailingTabsTrimmedFirst() throws {
        let art = TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL))
        let padded = art.split(separator: "\n", omittingEmptySubsequences: false)
            .map { String($0) + String(repeating: "\t", count: 5_000) + String(repeating: " ", count: 2_000) }.joined(separator: "\n")
        #expect(try QRScanner.scanFIDO(text: padded).url == Fixtures.chromeURL)
    }
}
