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

    @Test("problem(with:) names a reason exactly when decode refuses, and the reason is the right one")
    func problemAgreesWithDecode() {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let pieces: [Character] = ["A", "B", "g", "k", "n", "-", "_", "=", "+", "/", " ", "é"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        var reasons: Set<String> = []
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let length = Int(state >> 60) % 10
            var text = ""
            var next = state
            for _ in 0..<length {
                next = next &* 6_364_136_223_846_793_005 &+ 1
                text.append(pieces[Int(next >> 33) % pieces.count])
            }
            let problem = Base64URL.problem(with: text)
            #expect((Base64URL.decode(text) == nil) == (problem != nil), "\(text.debugDescription): \(problem ?? "decodes")")
            guard let problem else { continue }
            reasons.insert(String(problem.prefix { $0 != "(" }))  // one kind per reason, whatever the character
            if problem.hasPrefix("its last character carries non-zero leftover bits") {
                // Clearing the last character's unused low bits makes it decode: that was the only fault.
                var scalars = Array(text.unicodeScalars)
                let padding = scalars.reversed().prefix { $0 == "=" }.count
                let last = scalars.count - padding - 1
                let unused = ((scalars.count - padding) * 6) % 8
                let value = alphabet.firstIndex(of: Character(scalars[last]))!
                scalars[last] = alphabet[value & ~((1 << unused) - 1)].unicodeScalars.first!
                let fixed = String(String.UnicodeScalarView(scalars))
                #expect(Base64URL.decode(fixed) != nil, "\(text) → \(fixed)")
            }
        }
        // Every kind of reason is reachable from these pieces.
        #expect(reasons.count == 7, "\(reasons.sorted())")
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
