@testable import HybridInspect
import Testing

/// How the SVG lays out a message's decoded lines: nothing cut without a word, anomalies always drawn.
@Suite struct SequenceDiagramSVGTests {
    @Test("a long line goes on under itself, indented, instead of being cut")
    func longLinesWrap() {
        let long = "2 (authData): " + String(repeating: "ab", count: 60) + " flags 0x1d [UP, UV, BE, BS], signCount 7"
        let drawn = SequenceDiagram.svgLines([long])
        #expect(drawn.count == 2 && drawn.allSatisfy { $0.count <= SequenceDiagram.svgColumns }, "\(drawn)")
        #expect(drawn[1].hasPrefix("    ") && drawn.joined().contains("signCount 7"), "\(drawn)")
        let anomaly = "! " + String(repeating: "x", count: 150)
        #expect(SequenceDiagram.svgLines([anomaly]).allSatisfy { $0.hasPrefix("!") }, "a continuation of an anomaly is drawn as one")
        // Control characters are shown as \u{XX} before the line is measured: no drawn line is longer.
        let controls = SequenceDiagram.svgLines([String(repeating: "\u{7}", count: 60)].map(SequenceDiagram.visible))
        #expect(controls.count > 1 && controls.allSatisfy { $0.count <= SequenceDiagram.svgColumns }, "\(controls)")
    }

    @Test("past the line budget: one line says how many more there are, and the anomaly lines are still drawn")
    func budget() {
        let lines = (1...40).map { "line \($0)" } + ["! sequence gap: expected 1, this is 2"]
        let drawn = SequenceDiagram.svgLines(lines)
        #expect(drawn.count == SequenceDiagram.svgLinesPerMessage + 2, "\(drawn)")
        #expect(drawn[SequenceDiagram.svgLinesPerMessage] == "… 16 more lines here (the terminal output shows them all)")
        #expect(drawn.last == "! sequence gap: expected 1, this is 2")
        #expect(SequenceDiagram.svgLines(Array(lines.prefix(10))) == Array(lines.prefix(10)), "a short message is drawn as it is")
    }

    @Test("peer text with U+FFFE or U+FFFF (not XML 1.0 characters) leaves the SVG well-formed: every character is an XML Char")
    func nonXMLCharacters() {
        // Built from their values: Swift refuses some noncharacters in a string literal.
        func text(_ values: UInt32...) -> String { String(String.UnicodeScalarView(values.compactMap(Unicode.Scalar.init))) }
        let kept = text(0xFDD0, 0x1FFFE, 0x10FFFF)
        let hostile = "name" + text(0xFFFE, 0xFFFF) + "<" + kept
        let message = Inspection.Message(
            index: 0, milliseconds: 1, from: "desktop", to: "phone", bytes: 81, sequence: nil, plaintextBytes: nil,
            title: "title \(hostile)", details: ["4 (user): \(hostile)"], anomalies: ["! \(hostile)"])
        let inspection = Inspection(
            flow: "QR", pattern: "Noise_KNpsk0_P256_AESGCM_SHA256", tunnelID: "00", routingID: "00", startMilliseconds: 0,
            keys: .notGiven, keyDetail: hostile, qr: [hostile], messages: [message], closure: "closed: \(hostile)", anomalies: [hostile])
        let svg = SequenceDiagram.svg(inspection)
        // XML 1.0 §2.2: Char ::= #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]
        let bad = svg.unicodeScalars.filter { scalar in
            switch scalar.value {
            case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: return false
            default: return true
            }
        }
        #expect(bad.isEmpty, "not XML characters in the SVG: \(bad.map { String($0.value, radix: 16) })")
        #expect(svg.contains("name\\u{FFFE}\\u{FFFF}&lt;" + kept), "escaped as \\u{…}; other noncharacters are XML characters, kept")
        // The terminal shows them the same way.
        #expect(SequenceDiagram.text(inspection).contains("closed: name\\u{FFFE}\\u{FFFF}<"))
    }
}
