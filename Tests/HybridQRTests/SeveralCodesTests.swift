import HybridQR
import Testing

/// Inputs holding more than one `FIDO:/` code, some of them invalid.
@Suite("Several FIDO codes")
struct SeveralCodesTests {
    /// Two codes side by side in one bitmap, `left` then `right`.
    private func sideBySide(_ left: String, _ right: String) throws -> GrayImage {
        var images: [GrayImage] = []
        for text in [left, right] { images.append(GrayImage(matrix: try QREncoder.encode(text: text), moduleSize: 4)) }
        let height = max(images[0].height, images[1].height)
        let width = images[0].width + images[1].width
        var pixels = [UInt8](repeating: 255, count: width * height)
        var left = 0
        for image in images {
            for y in 0..<image.height {
                for x in 0..<image.width { pixels[y * width + left + x] = image.pixels[y * image.width + x] }
            }
            left += image.width
        }
        return try GrayImage(width: width, height: height, pixels: pixels)
    }

    @Test("an invalid FIDO:/ code beside a valid one: the valid one is used, and the note names it")
    func invalidBesideValid() throws {
        for image in [try sideBySide("FIDO:/999", Fixtures.chromeURL), try sideBySide(Fixtures.chromeURL, "FIDO:/999")] {
            let scan = try QRScanner.scanFIDO(image: image)
            #expect(scan.url == Fixtures.chromeURL)
            #expect(scan.otherCodes == 1)
            let notes = scan.notes(about: "mix.png")
            #expect(notes.count == 1)
            #expect(notes.first?.contains("holds 2 different FIDO:/ codes") == true, "\(notes)")
            #expect(notes.first?.contains("FIDO:/162870791865…") == true, "\(notes)")
        }
        let scan = try QRScanner.fido(from: ["FIDO:/999", "https://example.com", Fixtures.chromeURL])
        #expect(scan.url == Fixtures.chromeURL && scan.otherCodes == 1 && scan.invalidOtherCodes == 1)
        #expect(scan.notes(about: "x") == [
            "x holds 2 different FIDO:/ codes; using the first valid one decoded, FIDO:/162870791865…; 1 other(s) hold no valid payload"
        ])
    }

    @Test("a capture whose lowest (newest) code is an invalid FIDO:/: the note says the newer code is invalid and the one used may be an older desktop's")
    func invalidNewestInCapture() throws {
        let art = { (text: String) throws -> String in TerminalArt.render(try QREncoder.encode(text: text)) }
        let capture = "$ desktop\n" + (try art(Fixtures.chromeURL)) + "\n$ desktop\n" + (try art("FIDO:/999")) + "\n$ "
        let scan = try QRScanner.scanFIDO(text: capture)
        #expect(scan.url == Fixtures.chromeURL && scan.invalidOtherCodes == 1)
        #expect(scan.notes(about: "cap.txt") == [
            "cap.txt holds 2 different FIDO:/ codes; the 1 newer one(s) below hold no valid payload, so using the one above them, "
                + "FIDO:/162870791865…, which may be an older desktop's: if it is not answered, capture the newest code again"
        ])
    }

    @Test("two invalid FIDO:/ codes: payload invalid, saying none is valid and the first one's rule")
    func noneValid() throws {
        let error = #expect(throws: QRError(.invalidFIDOPayload)) { try QRScanner.fido(from: ["FIDO:/999", "FIDO:/12"]) }
        #expect(error?.reason.hasPrefix("none of the 2 FIDO:/ codes is valid; the first: digit group 0") == true, "\(String(describing: error))")
        let single = #expect(throws: QRError(.invalidFIDOPayload)) { try QRScanner.fido(from: ["FIDO:/999"]) }
        #expect(single?.reason.hasPrefix("digit group 0") == true, "\(String(describing: single))")
    }
}
