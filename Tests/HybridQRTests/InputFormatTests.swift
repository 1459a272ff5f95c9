import Foundation
import HybridQR
import Testing

/// Inputs in formats other than PNG, PGM and UTF-8 text: decoded when they are text (UTF-16 with a
/// byte-order mark).
@Suite("Input formats")
struct InputFormatTests {
    /// The Chrome code as normal terminal art, as PowerShell writes a captured line: CRLF endings.
    private func art() throws -> String {
        TerminalArt.render(try QREncoder.encode(fidoURL: Fixtures.chromeURL)).replacingOccurrences(of: "\n", with: "\r\n")
    }

    /// `text` as UTF-16 code units in bytes, big- or little-endian, after a byte-order mark.
    private func utf16(_ text: String, bigEndian: Bool) -> [UInt8] {
        ("\u{FEFF}" + text).utf16.flatMap { unit in
            let (high, low) = (UInt8(unit >> 8), UInt8(unit & 0xFF))
            return bigEndian ? [high, low] : [low, high]
        }
    }

    @Test("UTF-16LE and UTF-16BE text with a byte-order mark (Windows PowerShell 5.1's >) is read as text")
    func utf16WithMark() throws {
        for bigEndian in [false, true] {
            let bytes = utf16(try art() + "\r\n" + Fixtures.chromeURL + "\r\n", bigEndian: bigEndian)
            #expect(QRScanner.sniff(bytes) == .text)
            #expect(try QRScanner.scan(bytes: bytes) == Fixtures.chromeURL, "big-endian: \(bigEndian)")
            #expect(try QRScanner.scanFIDO(bytes: bytes).url == Fixtures.chromeURL)
        }
    }

    @Test("UTF-16 cut short after its mark, and UTF-16 without a mark, are refused saying so")
    func utf16Refused() throws {
        let cut = Array(utf16("hello", bigEndian: false).dropLast())
        let error = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: cut) }
        #expect(error?.reason.contains("UTF-16LE byte-order mark but is not valid UTF-16") == true, "\(String(describing: error))")
        let unmarked = Array(utf16("hello", bigEndian: false).dropFirst(2))
        let noMark = #expect(throws: QRError(.notAnImage)) { try QRScanner.scan(bytes: unmarked) }
        #expect(noMark?.reason.contains("iconv -f UTF-16LE -t UTF-8") == true, "\(String(describing: noMark))")
    }
}
