import ArgumentParser
import Foundation
import HybridCore
import HybridFiles
import HybridQR
import HybridSim

/// `hybrid-sim qr`: show a `FIDO:/` QR code (terminal, PNG, SVG) or scan one back.
struct QRCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "qr",
        abstract: "Show a FIDO:/ QR code (terminal art, PNG, SVG) or scan one from a file.",
        subcommands: [Show.self, Scan.self]
    )
}

extension QRErrorCorrection: ExpressibleByArgument {
    /// Accepts `L`, `M`, `Q` or `H` in either case.
    public init?(argument: String) {
        self.init(rawValue: argument.uppercased())
    }
}

extension QRCommand {
    /// `hybrid-sim qr show FIDO:/…`
    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print a FIDO:/ URL as a QR code in the terminal, followed by the URL line.",
            discussion: """
                The code is drawn with Unicode half blocks (two module rows per line) inside a \
                4-module quiet zone. The default drawing suits light-background terminals; use \
                --invert on a dark background. Terminal output goes to stdout; file notices to stderr.
                """
        )

        @Argument(help: "The FIDO:/ URL to encode, e.g. as printed by `hybrid-sim desktop`.")
        var url: String

        @Option(name: .long, help: ArgumentHelp("Also write the code as an 8-bit grayscale PNG to this file.", valueName: "file"))
        var png: String?

        @Option(name: .long, help: ArgumentHelp("Also write the code as an SVG document to this file.", valueName: "file"))
        var svg: String?

        @Flag(name: .long, help: "Draw for a dark-background terminal: dark modules as background, light modules and quiet zone as blocks. (default: off, dark modules drawn as blocks)")
        var invert = false

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Pixels per module in the PNG (CSS pixels in the SVG), 1…64.", valueName: "n"))
        var scale = 8

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Quiet zone around the code in modules, 0…16; the standard asks for 4.", valueName: "n"))
        var quietZone = TerminalArt.defaultQuietZone

        @Option(name: .long, help: ArgumentHelp("Error-correction level: L, M, Q or H (M: ~15 % damage tolerated, 37×37 modules for a desktop QR).", valueName: "level"))
        var errorCorrection = QREncoder.defaultErrorCorrection

        @Flag(name: .long, help: "Encode the text as given (byte mode) without checking that it is a valid FIDO:/ URL, e.g. to test scanners. (default: off)")
        var raw = false

        func validate() throws {
            guard (1...64).contains(scale) else { throw ValidationError("--scale must be between 1 and 64, got \(scale).") }
            guard (0...16).contains(quietZone) else {
                throw ValidationError("--quiet-zone must be between 0 and 16, got \(quietZone).")
            }
            if !raw {
                do {
                    _ = try QRPayload(url: url)
                } catch {
                    throw ValidationError("not a valid FIDO:/ URL: \(error.reason) (use --raw to encode any text)")
                }
            }
        }

        func run() throws {
            try QRCommand.reportingFailures(show)
        }

        private func show() throws {
            let matrix = raw
                ? try QREncoder.encode(text: url, errorCorrection: errorCorrection)
                : try QREncoder.encode(fidoURL: url, errorCorrection: errorCorrection)
            let symbol = "QR version \(matrix.version)-\(matrix.errorCorrection), \(matrix.size)×\(matrix.size) modules"
            if let png {
                let image = GrayImage(matrix: matrix, moduleSize: scale, quietZone: quietZone)
                try PNGCodec.write(image, toFile: png)
                progressLine("wrote \(png): \(image.width)×\(image.height) px, \(symbol)")
            }
            if let svg {
                try SVGRenderer.write(matrix, toFile: svg, moduleSize: scale, quietZone: quietZone)
                progressLine("wrote \(svg): \(symbol)")
            }
            // Files first: if one cannot be written, the command fails without printing a code.
            let art = TerminalArt.render(matrix, inverted: invert, quietZone: quietZone)
            try printResult(art)
            try printResult(url)
            // As the desktop says them: a terminal too narrow, or a locale that draws other characters.
            let width = art.split(separator: "\n").map(\.count).max() ?? 0
            let environment = ProcessInfo.processInfo.environment
            for note in TerminalFit.notes(artWidth: width, environment: environment, pngPath: png, pngFlag: "--png") {
                progressLine("note: " + note)
            }
        }
    }

    /// `hybrid-sim qr scan FILE`
    struct Scan: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Decode the QR code in a PNG, PGM or terminal capture and print its FIDO:/ URL.",
            discussion: """
                The file type is detected from its content: PNG, PGM (P5 or P2), or UTF-8 text \
                holding the half-block art printed by `qr show` or `desktop` (a copy of the \
                terminal or `tmux capture-pane -p` output; other lines and colour codes are \
                ignored). Exit status 0 on success, 1 if no valid FIDO:/ code is found (one line \
                on stderr says why), 64 on bad arguments.
                """
        )

        @Argument(help: ArgumentHelp("PNG, PGM or text file to scan; '-' reads standard input.", valueName: "file"))
        var file: String

        @Flag(name: .long, help: "Print the decoded payload as one JSON object (publicKey, secret, knownDomains, timestamp, supportsLinking, requestType) instead of the URL. (default: off)")
        var decode = false

        @Flag(name: .long, help: "Print whatever text the code holds, without requiring a FIDO:/ URL; on a terminal its control characters are shown escaped (\\u{1B}). (default: off)")
        var raw = false

        func validate() throws {
            if raw && decode { throw ValidationError("--raw and --decode cannot be combined.") }
        }

        func run() throws {
            try QRCommand.reportingFailures(scan)
        }

        private func scan() throws {
            // `-` is standard input, read with the same size and quiet limits as a file.
            if raw {
                try printResult(Self.safeForOutput(try QRScanner.scan(fileAt: file)))
                return
            }
            let result = try QRScanner.scanFIDO(fileAt: file)
            // As phone --scan says it: the code printed is one of several, or an older one.
            for note in result.notes(about: file) { StandardStream.errorLine("note: " + note) }
            try printResult(decode ? result.payloadJSON : result.url)
        }

        /// `text` as `--raw` prints it: as it is into a pipe or file, but with its control
        /// characters escaped (`\u{1B}`, a backslash as `\\`) when standard output is a terminal, which would act on
        /// them (a hostile code's OSC, SGR or `ESC [2J`), with a note saying so.
        private static func safeForOutput(_ text: String) -> String {
            guard isatty(STDOUT_FILENO) == 1 else { return text }
            let escaped = TerminalText.escapingControls(text)
            if escaped != text {
                StandardStream.errorLine(
                    "note: the code holds control characters or backslashes, shown escaped (\\u{…}, \\\\) because standard output is a terminal; "
                        + "redirect or pipe it for the raw text")
            }
            return escaped
        }
    }
}

extension QRCommand {
    /// Runs `body`; a ``QRError`` becomes one `error:` line and exit 1, as every other command words
    /// its failures (ArgumentParser would print `Error:`).
    static func reportingFailures(_ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as QRError {
            throw errorLine(error.description, status: 1)
        }
    }
}
