import ArgumentParser
import Foundation
import HybridCore
import HybridFiles
import HybridInspect
import HybridSim

/// `hybrid-sim inspect RECORDING`: decodes a tunnel recording made by `relay --record` (Docs/INSPECT.md).
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Decode a tunnel recording (relay --record) as a sequence diagram.",
        discussion: """
            Decodes the Noise handshake; with the key log written by desktop/phone --keylog, every \
            transport message (post-handshake getInfo, update and linking information, the CTAP2 \
            request and response as annotated CBOR); flags anomalies. Exit status: 0 decoded, \
            1 the key log's keys don't match this session, 2 unreadable recording, key log or QR.
            """
    )

    @Argument(help: ArgumentHelp("A .hsrec file written by hybrid-sim relay --record.", valueName: "recording"))
    var recording: String

    @Option(help: ArgumentHelp("Key log written by desktop/phone --keylog.", valueName: "file"))
    var keylog: String?

    @Option(help: ArgumentHelp("The session's FIDO:/ URL, to decode the QR code and check it is this tunnel's.", valueName: "url"))
    var qr: String?

    @Option(help: ArgumentHelp(
        "Also write the sequence diagram as SVG to this file (- or standard output's file: the SVG instead of the terminal diagram).",
        valueName: "file"))
    var svg: String?

    @Flag(help: "Print the decoded session as JSON instead of the terminal diagram.")
    var json = false

    func validate() throws {
        if recording == "-", keylog == "-" {
            throw ValidationError("the recording and --keylog cannot both be standard input (-)")
        }
        if json, svgIsStandardOutput {
            throw ValidationError("--svg \(svg ?? "") is standard output, where --json prints: give --svg another file")
        }
    }

    /// `--svg -`, `/dev/stdout`, or the file standard output goes to (`--svg out.svg > out.svg`): the
    /// SVG is the output, and the terminal diagram is not printed into it.
    var svgIsStandardOutput: Bool {
        guard let svg else { return false }
        return svg == "-" || FileWriter.names(svg, descriptor: 1)
    }

    func run() throws {
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(recording, maximumSize: 256 << 20)
        } catch {
            fail("cannot read \(recording): \(error.reason)")
        }
        let decoded: TunnelRecording
        do {
            decoded = try TunnelRecording(decoding: bytes)
        } catch {
            fail("\(recording): \(error)")
        }
        var keys: [SessionKeys]? = nil
        if let keylog {
            let text: String
            do {
                text = String(decoding: try InputFile.read(keylog, allowsEmpty: true), as: UTF8.self)
            } catch {
                fail("cannot read \(keylog): \(error.reason)")
            }
            let read: (entries: [SessionKeys], otherLines: Int)
            do {
                read = try SessionKeys.readKeyLog(text)
            } catch {
                fail("\(keylog): \(error.reason)")
            }
            if read.entries.isEmpty, read.otherLines > 0 {
                fail("\(keylog) holds no \(SessionKeys.keyLogLabel) line: not a key log written by --keylog (lines with other labels are skipped)")
            }
            keys = read.entries
        }
        if let qr {
            do {
                _ = try QRPayload(url: qr)
            } catch {
                fail("--qr: \(error.reason)")
            }
        }
        let inspection = Inspector.inspect(decoded, keyLog: keys, qrURL: qr)
        if svgIsStandardOutput {
            // The SVG is the result: the terminal diagram would land in the same file.
            try printResult(SequenceDiagram.svg(inspection), newline: false)
        } else {
            // The file first: if it cannot be written, the command fails before printing (one JSON
            // document on stdout, or the error event alone).
            if let svg {
                // With a key log the diagram holds the decrypted messages: owner only, like the key log.
                do {
                    try FileWriter.replacePrivately(svg, with: Array(SequenceDiagram.svg(inspection).utf8))
                } catch {
                    fail("cannot write \(svg): \(error.description)")
                }
            }
            if json {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
                let data = (try? encoder.encode(inspection)) ?? Data()
                try printResult(String(decoding: data, as: UTF8.self))
            } else {
                try printResult(SequenceDiagram.text(inspection), newline: false)
            }
        }
        if inspection.keys == .noEntry || inspection.keys == .mismatch {
            // The document is out (its `keys` member says why): no second JSON object after it.
            throw errorLine(inspection.keyDetail, status: 1)
        }
    }

    private func fail(_ message: String) -> Never {
        _ = failureLine(message, kind: "badInput", status: 2, json: json)
        Foundation.exit(2)
    }
}
