import CTAP2

/// The one error type of the `HybridQR` module.
///
/// Every failure of encoding, rendering, reading an image or scanning a code is reported as a
/// `QRError`. Two errors are equal when their ``code`` is equal, whatever their
/// ``reason``, so tests can write `#expect(throws: QRError(.noQRCode)) { … }`.
public struct QRError: CodedError {
    /// What kind of failure this is. Stable; scripts and tests may depend on it.
    public let code: Code
    /// The human-readable detail (which rule failed, which file, what libpng said).
    public let reason: String

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error with a code and a human-readable reason.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// A one-line, human-readable message: the code's summary followed by the reason.
    public var description: String {
        reason.isEmpty ? code.summary : "\(code.summary): \(reason)"
    }

    // MARK: - Codes

    /// The kind of a ``QRError``: an extensible set of named codes.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A short stable identifier, e.g. `"noQRCode"`.
        public let name: String
        /// A short human summary, e.g. `"no QR code found"`.
        public let summary: String

        private init(_ name: String, _ summary: String) {
            self.name = name
            self.summary = summary
        }

        /// The identifier of the code.
        public var description: String { name }

        /// Equality by ``name``.
        public static func == (lhs: Code, rhs: Code) -> Bool { lhs.name == rhs.name }

        /// Hashes the ``name``.
        public func hash(into hasher: inout Hasher) { hasher.combine(name) }

        /// The input decoded as an image (or terminal text), but no QR symbol was found in it.
        public static let noQRCode = Code("noQRCode", "no QR code found")
        /// A QR symbol was decoded, but its text does not start with `FIDO:/`.
        public static let notFIDOURL = Code("notFIDOURL", "QR code found but it is not a FIDO:/ URL")
        /// The text is a `FIDO:/` URL, but its payload breaks a rule of the hybrid QR format.
        public static let invalidFIDOPayload = Code("invalidFIDOPayload", "FIDO:/ payload invalid")
        /// The file could not be opened or read.
        public static let fileUnreadable = Code("fileUnreadable", "file unreadable")
        /// The bytes are neither a PNG, a PGM nor UTF-8 text, or the image itself is malformed.
        public static let notAnImage = Code("notAnImage", "not an image")
        /// The text given to the encoder is not acceptable (for example not `FIDO:/` + digits).
        public static let invalidInput = Code("invalidInput", "invalid input for the QR encoder")
        /// The data does not fit into the largest QR symbol (version 40) at the chosen level.
        public static let dataTooLarge = Code("dataTooLarge", "data too large for a QR code")
        /// libqrencode, libzbar or libpng failed for a reason other than the above.
        public static let libraryFailure = Code("libraryFailure", "QR library failure")
        /// An output file (PNG, SVG) could not be written.
        public static let writeFailed = Code("writeFailed", "could not write file")
    }
}
