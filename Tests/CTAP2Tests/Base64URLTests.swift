import CTAP2
import Testing

/// The project's one base64url rule (RFC 4648 §5): write unpadded; `decode` also takes `=` padding to
/// a multiple of four, `decodeUnpadded` takes canonical unpadded text only; both refuse dangling bits.
@Suite struct Base64URLTests {
    @Test("known answers, unpadded, URL alphabet", arguments: [
        ([UInt8](), ""), ([0xFB], "-w"), ([0xFB, 0xFF], "-_8"), ([0xFB, 0xFF, 0xBF], "-_-_"),
        (Array("ABC".utf8), "QUJD"), (Array(0..<20), "AAECAwQFBgcICQoLDA0ODxAREhM"),
    ] as [([UInt8], String)])
    func knownAnswers(bytes: [UInt8], text: String) {
        #expect(Base64URL.encode(bytes) == text)
        #expect(Base64URL.decodeUnpadded(text) == bytes)
        #expect(Base64URL.decode(text) == bytes)
    }

    @Test("decode takes correct padding; decodeUnpadded refuses it", arguments: [
        ("-w==", [UInt8]([0xFB])), ("-_8=", [0xFB, 0xFF]),
    ])
    func padding(text: String, bytes: [UInt8]) {
        #expect(Base64URL.decode(text) == bytes)
        #expect(Base64URL.decodeUnpadded(text) == nil)
    }

    @Test("both refuse malformed text", arguments: [
        "A", "AB", "-x", "+/8", "a b", "QUJD=", "QUJD====", "-w=", "-w===", "=", "-w=A", "QU=D",
    ])
    func malformed(text: String) {
        #expect(Base64URL.decode(text) == nil, "\(text)")
        #expect(Base64URL.decodeUnpadded(text) == nil, "\(text)")
    }

    @Test("round trip of every length up to 64")
    func roundTrip() {
        for count in 0...64 {
            let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            #expect(Base64URL.decodeUnpadded(Base64URL.encode(bytes)) == bytes, "length \(count)")
        }
    }

    @Test("Hex.decode(_:byteCount:) is exact")
    func hexExact() {
        #expect(Hex.decode("0aBc", byteCount: 2) == [0x0A, 0xBC])
        #expect(Hex.decode("0aBc", byteCount: 3) == nil)
        #expect(Hex.decode("0aB", byteCount: 2) == nil)
        #expect(Hex.decode("0aBg", byteCount: 2) == nil)
    }
}
