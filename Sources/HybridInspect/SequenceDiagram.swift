import HybridCore

/// Draws an ``Inspection`` as a sequence diagram: desktop on the left, phone on the right, one
/// arrow per recorded message with its time, size and meaning, the decoded contents beneath it and
/// anomalies marked `!`. ``text(_:)`` is for the terminal, ``svg(_:)`` for documents and browsers.
public enum SequenceDiagram {
    /// Width of the arrow between the two lifelines, in characters.
    static let lane = 58

    /// The terminal rendering (UTF-8 box-drawing characters, no colours).
    public static func text(_ inspection: Inspection) -> String {
        var out: [String] = []
        out.append("\(inspection.flow) session, \(inspection.pattern), tunnel \(inspection.tunnelID), routing ID \(inspection.routingID)")
        out.append("keys: \(inspection.keyDetail)")
        if !inspection.qr.isEmpty {
            out.append("QR code:")
            out += inspection.qr.map { "  " + $0 }
        }
        out.append("")
        out.append(pad("", 12) + pad("desktop", 9) + String(repeating: " ", count: lane - 6) + "phone")
        for message in inspection.messages {
            let label = arrowLabel(message.title, bytes: message.bytes)
            let time = pad("+" + String(format2: message.milliseconds) + " ms", 12)
            out.append(time + "   │" + arrow(label: label, rightwards: message.from == "desktop") + "│")
            for line in detailLines(message) {
                out.append(String(repeating: " ", count: 12) + "   │ " + line)
            }
        }
        out.append("")
        out.append(inspection.closure)
        out += inspection.notes.map { "note: " + $0 }
        let anomalies = inspection.allAnomalies
        out.append(anomalies.isEmpty ? "no anomalies" : "\(anomalies.count) anomal\(anomalies.count == 1 ? "y" : "ies"):")
        out += anomalies.map { "  ! " + $0 }
        // Peer text (a close reason, a user name in decrypted CBOR) reaches these lines: each stays
        // one line and cannot repaint the terminal.
        return out.map(visible).joined(separator: "\n") + "\n"
    }

    /// `text` with every character that could break or disguise a line (`isHiddenInPeerText`, the
    /// set `PeerText` escapes in messages), and every one XML 1.0 does not allow in a document
    /// (``isXMLCharacter(_:)``: U+FFFE, U+FFFF), written as `\u{XX}`.
    static func visible(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.isHiddenInPeerText || !isXMLCharacter(scalar) {
                out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Whether `scalar` is a `Char` of XML 1.0 (§2.2): tab, line feed, carriage return, U+0020–U+D7FF,
    /// U+E000–U+FFFD, U+10000–U+10FFFF. Anything else (the other C0 controls, U+FFFE, U+FFFF; a
    /// surrogate cannot be a Swift scalar) makes the SVG ill-formed, raw or as a character reference.
    static func isXMLCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x9, 0xA, 0xD, 0x20...0xD7FF, 0xE000...0xFFFD, 0x10000...0x10FFFF: return true
        default: return false
        }
    }

    static func detailLines(_ message: Inspection.Message) -> [String] {
        var lines: [String] = []
        if let sequence = message.sequence {
            lines.append("seq \(sequence)" + (message.plaintextBytes.map { ", \($0) plaintext bytes" } ?? ""))
        }
        lines += message.details
        lines += message.anomalies.map { "! " + $0 }
        return lines
    }

    /// ` title (N B) ` fitted to the arrow: a title too long is shortened with `…`, the byte count kept.
    static func arrowLabel(_ title: String, bytes: Int) -> String {
        let size = " (\(bytes) B) "
        let room = lane - 5 - size.count
        return " " + (title.count > room ? String(title.prefix(room - 1)) + "…" : title) + size
    }

    static func arrow(label: String, rightwards: Bool) -> String {
        let body = label.count + 4 > lane ? String(label.prefix(lane - 5)) + "… " : label
        let dashes = lane - body.count - 1
        let left = dashes / 2
        let right = dashes - left
        return rightwards
            ? String(repeating: "─", count: left) + body + String(repeating: "─", count: right) + "▶"
            : "◀" + String(repeating: "─", count: left) + body + String(repeating: "─", count: right)
    }

    static func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }

    /// A standalone SVG document.
    public static func svg(_ inspection: Inspection) -> String {
        let width = 980
        let left = 150
        let right = 830
        let lineHeight = 15
        // The header, as the terminal's: the session, the keys, and the QR code when one was given.
        var header = [
            "\(inspection.flow) session, \(inspection.pattern), tunnel \(inspection.tunnelID), routing ID \(inspection.routingID)",
            "keys: \(inspection.keyDetail)",
        ]
        if !inspection.qr.isEmpty { header += ["QR code:"] + inspection.qr.map { "  " + $0 } }
        let top = 16 * (header.count - 2)
        var y = 96 + top
        var body: [String] = []
        for message in inspection.messages {
            let rightwards = message.from == "desktop"
            let (x1, x2) = rightwards ? (left, right) : (right, left)
            let color = message.anomalies.isEmpty ? "#1f4e79" : "#b00020"
            body.append("<text x=\"20\" y=\"\(y + 4)\" class=\"t\">+\(String(format2: message.milliseconds)) ms</text>")
            body.append("<text x=\"\((left + right) / 2)\" y=\"\(y - 6)\" class=\"m\" text-anchor=\"middle\" fill=\"\(color)\">\(escape(message.title)) (\(message.bytes) B)</text>")
            body.append("<line x1=\"\(x1)\" y1=\"\(y)\" x2=\"\(x2)\" y2=\"\(y)\" stroke=\"\(color)\" stroke-width=\"1.5\" marker-end=\"url(#\(message.anomalies.isEmpty ? "a" : "r"))\"/>")
            y += lineHeight
            // Escaped for display first (`\u{XX}` is longer than the character), then wrapped.
            for line in svgLines(detailLines(message).map(visible)) {
                let klass = line.hasPrefix("!") ? "w" : "d"
                body.append("<text x=\"\(left + 12)\" y=\"\(y)\" class=\"\(klass)\">\(escape(line))</text>")
                y += lineHeight - 2
            }
            y += 26
        }
        let anomalies = inspection.allAnomalies
        // A note is longer than the closing line: wrapped as a message's lines are.
        for line in [inspection.closure] + svgLines(inspection.notes.map { visible("note: " + $0) }) {
            body.append("<text x=\"20\" y=\"\(y)\" class=\"d\">\(escape(line))</text>")
            y += lineHeight
        }
        let summary = anomalies.isEmpty ? "no anomalies" : "\(anomalies.count) anomal\(anomalies.count == 1 ? "y" : "ies") (marked ! above)"
        body.append("<text x=\"20\" y=\"\(y)\" class=\"\(anomalies.isEmpty ? "d" : "w")\">\(summary)</text>")
        let height = y + 20
        var out: [String] = []
        // xml:space and white-space:pre keep the indentation that shows nesting (getInfo's keys).
        out.append("<svg xmlns=\"http://www.w3.org/2000/svg\" xml:space=\"preserve\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" font-family=\"monospace\">")
        out.append("<style>text{white-space:pre}.h{font-size:15px;font-weight:bold}.m{font-size:13px}.t{font-size:11px;fill:#555}.d{font-size:11px;fill:#333}.w{font-size:11px;fill:#b00020}</style>")
        out.append("<defs>" + [("a", "#1f4e79"), ("r", "#b00020")].map { id, color in
            "<marker id=\"\(id)\" markerWidth=\"10\" markerHeight=\"8\" refX=\"9\" refY=\"4\" orient=\"auto\"><path d=\"M0,0 L10,4 L0,8 z\" fill=\"\(color)\"/></marker>"
        }.joined() + "</defs>")
        out.append("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>")
        for (index, line) in header.enumerated() {
            out.append("<text x=\"20\" y=\"\(22 + 16 * index)\" class=\"d\">\(escape(line))</text>")
        }
        out.append("<text x=\"\(left)\" y=\"\(66 + top)\" class=\"h\" text-anchor=\"middle\">desktop</text>")
        out.append("<text x=\"\(right)\" y=\"\(66 + top)\" class=\"h\" text-anchor=\"middle\">phone</text>")
        out.append("<line x1=\"\(left)\" y1=\"\(72 + top)\" x2=\"\(left)\" y2=\"\(y - lineHeight - 10)\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>")
        out.append("<line x1=\"\(right)\" y1=\"\(72 + top)\" x2=\"\(right)\" y2=\"\(y - lineHeight - 10)\" stroke=\"#999\" stroke-dasharray=\"4 3\"/>")
        out += body
        out.append("</svg>")
        return out.joined(separator: "\n") + "\n"
    }

    /// Characters of a detail line that fit between the lifelines at 11 px monospace.
    static let svgColumns = 100
    /// Detail lines drawn under one arrow, before "… N more lines".
    static let svgLinesPerMessage = 24

    /// A message's detail lines as the SVG draws them: a line longer than ``svgColumns`` goes on
    /// under it, indented (nothing is cut); at most ``svgLinesPerMessage`` lines, then one saying
    /// how many more the terminal output shows, except the anomaly lines (`!`), drawn always.
    static func svgLines(_ lines: [String]) -> [String] {
        var wrapped: [String] = []
        for line in lines {
            var rest = Substring(line)
            var first = true
            repeat {
                let width = first ? svgColumns : svgColumns - 4
                let piece = rest.prefix(width)
                let isAnomaly = line.hasPrefix("!")
                // A continuation of an anomaly line is drawn as one too.
                wrapped.append(first ? String(piece) : (isAnomaly ? "!   " : "    ") + piece)
                rest = rest.dropFirst(piece.count)
                first = false
            } while !rest.isEmpty
        }
        guard wrapped.count > svgLinesPerMessage else { return wrapped }
        var kept = Array(wrapped.prefix(svgLinesPerMessage))
        let anomalies = wrapped.dropFirst(svgLinesPerMessage).filter { $0.hasPrefix("!") }
        let omitted = wrapped.count - svgLinesPerMessage - anomalies.count
        if omitted > 0 { kept.append("… \(omitted) more line\(omitted == 1 ? "" : "s") here (the terminal output shows them all)") }
        return kept + anomalies
    }

    /// `text` for SVG character data: markup characters as entities, and what ``visible(_:)``
    /// escapes as `\u{XX}` (XML 1.0 allows no C0 control but tab and line breaks, nor U+FFFE or
    /// U+FFFF, not even as a character reference, so a raw one made the file unreadable).
    static func escape(_ text: String) -> String {
        // By scalar: "<" followed by a combining mark is one Character that is not "<".
        var out = ""
        for scalar in visible(text).unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
