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

    @Test("the plain capture really has its trailing spaces trimmed")
    func trimmed() throws {
        let text = try String(contentsOf: Self.directory.appendingPathComponent("tmux-normal.txt"), encoding: .utf8)
        #expect(!text.split(separator: "\n").contains { $0.hasSuffix(" ") })
    }
}
