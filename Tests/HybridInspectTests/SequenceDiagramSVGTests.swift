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
}
