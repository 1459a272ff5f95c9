import CTAP2
import HybridCore

/// The `FIDO:/` URL form of a hybrid QR code (CTAP 2.2 §11.5.1 "Hybrid transports").
public enum FIDOURL {
    /// The URL prefix, `FIDO:/`. Parsers compare it case-insensitively, like Chromium's
    /// `qr::Parse`.
    public static let prefix = HybridConstants.qrPrefix

    /// Whether `text` starts with ``prefix``, ignoring ASCII case only (Unicode case mapping
    /// would also accept look-alikes such as `fıdo:/` with a dotless i).
    public static func hasPrefix(_ text: String) -> Bool {
        let head = text.utf8.prefix(prefix.utf8.count).map { (0x61...0x7A).contains($0) ? $0 - 0x20 : $0 }
        return head.elementsEqual(prefix.utf8)
    }
}

/// A scanned hybrid QR code: the URL exactly as decoded, and its parsed payload.
public struct FIDOScan: Sendable, Hashable {
    /// The decoded `FIDO:/…` text.
    public let url: String
    /// The payload, parsed and checked by `QRPayload(url:)` (Chromium `qr::Parse` rules).
    public let payload: QRPayload
    /// How many other, different `FIDO:/` codes the same input held (not chosen: a terminal
    /// capture's lowest valid code is used, an image's first decoded valid one).
    public var otherCodes: Int = 0
    /// How many of the ``otherCodes`` were passed over because their payload is invalid.
    public var invalidOtherCodes: Int = 0
    /// What was scanned (`nil`: a bitmap handed over as such).
    public var kind: QRScanner.InputKind? = nil
    /// Runs of terminal art below the code used (newer, in a capture) that held no readable code:
    /// the newest code was cut short, and the one used may be an older desktop's.
    public var unreadableNewerArt: Int = 0

    /// Lines for the person who gave `name` to scan (each to print as `note: …`): the other codes
    /// it held, and a newer code that could not be read or (in a capture) held no valid payload,
    /// so that the code used may be an older desktop's.
    public func notes(about name: String) -> [String] {
        var notes: [String] = []
        if unreadableNewerArt > 0 {
            notes.append(
                "the lowest QR art in \(name) (the newest code) cannot be read, cut short or damaged; using a code "
                    + "above it, which may be an older desktop's: if this one is not answered, capture the newest code whole")
        }
        if otherCodes > 0 {
            let codes = "\(name) holds \(otherCodes + 1) different FIDO:/ codes"
            switch (kind == .text, invalidOtherCodes > 0) {
            case (true, false):
                notes.append("\(codes); using the lowest readable one (the newest), \(Self.start(of: url))")
            case (true, true):
                // The codes passed over are the ones below: the newest code is not the one used.
                notes.append(
                    "\(codes); the \(invalidOtherCodes) newer one(s) below hold no valid payload, so using the one above them, "
                        + "\(Self.start(of: url)), which may be an older desktop's: if it is not answered, capture the newest code again")
            case (false, let skipped):
                let valid = skipped ? "valid " : ""
                let passed = skipped ? "; \(invalidOtherCodes) other(s) hold no valid payload" : ""
                notes.append("\(codes); using the first \(valid)one decoded, \(Self.start(of: url))\(passed)")
            }
        }
        return notes
    }

    /// The start of a URL, enough to tell codes apart in a note: `FIDO:/` and 12 digits.
    static func start(of url: String) -> String {
        url.count > 18 ? "\(url.prefix(18))…" : url
    }
}

extension FIDOScan {
    /// The decoded payload as one line of JSON, keys in this order: `publicKey` (key 0, lower-case
    /// hex of the 33-byte compressed point), `secret` (key 1, hex), `knownDomains` (key 2),
    /// `timestamp` (key 3 or `null`), `supportsLinking` (key 4 or `null`), `requestType`
    /// (`"ga"` or `"mc"`). Printed by `hybrid-sim qr scan --decode`.
    public var payloadJSON: String {
        let fields = [
            ("publicKey", "\"\(Hex.encode(payload.compressedPublicKey))\""),
            ("secret", "\"\(Hex.encode(payload.secret))\""),
            ("knownDomains", "\(payload.knownDomainCount)"),
            ("timestamp", payload.timestamp.map { "\($0)" } ?? "null"),
            ("supportsLinking", payload.supportsLinking.map { $0 ? "true" : "false" } ?? "null"),
            ("requestType", "\"\(payload.requestType.rawValue)\""),
        ]
        return "{" + fields.map { "\"\($0.0)\":\($0.1)" }.joined(separator: ",") + "}"
    }
}

extension QRScanner {
    /// Scans a file (PNG, PGM or terminal capture) for a hybrid QR code and validates it.
    ///
    /// - Throws: everything ``scan(fileAt:)`` throws, then ``QRError/Code/notFIDOURL`` or
    ///   ``QRError/Code/invalidFIDOPayload`` (see ``fido(from:)``).
    public static func scanFIDO(fileAt path: String) throws(QRError) -> FIDOScan {
        try fido(from: findings(fileAt: path))
    }

    /// Scans PNG, PGM or text bytes for a hybrid QR code and validates it.
    public static func scanFIDO(bytes: [UInt8]) throws(QRError) -> FIDOScan {
        var found = try findings(bytes: bytes, source: "input")
        found.texts = try nonEmpty(found.texts, in: "input")
        return try fido(from: found)
    }

    /// Scans captured terminal text for a hybrid QR code (the lowest, i.e. newest, if it holds
    /// several) and validates it.
    public static func scanFIDO(text: String) throws(QRError) -> FIDOScan {
        var found = try findings(text: text)
        found.texts = try nonEmpty(found.texts, in: "text")
        return try fido(from: found)
    }

    /// Scans a bitmap for a hybrid QR code and validates it (the first valid one, if it holds
    /// several).
    public static func scanFIDO(image: GrayImage) throws(QRError) -> FIDOScan {
        try fido(from: nonEmpty(ZbarDecoder.decode(image), in: "\(image.width)×\(image.height) image"))
    }

    /// Picks the first decoded text that is a `FIDO:/` URL with a valid payload; counts the other
    /// `FIDO:/` texts in ``FIDOScan/otherCodes`` (and the invalid ones passed over in
    /// ``FIDOScan/invalidOtherCodes``).
    ///
    /// - Throws: ``QRError/Code/notFIDOURL`` if no text has the prefix (the reason quotes the
    ///   start of what was found); ``QRError/Code/invalidFIDOPayload`` naming the rule the first
    ///   `FIDO:/` text breaks, when none is valid.
    public static func fido(from texts: [String]) throws(QRError) -> FIDOScan {
        var urls: [String] = []
        for text in texts where FIDOURL.hasPrefix(text) && !urls.contains(text) { urls.append(text) }
        guard !urls.isEmpty else {
            let found = texts.first.map(preview) ?? "nothing"
            throw QRError(.notFIDOURL, "the code holds \(found)")
        }
        var firstRule = ""
        for (index, url) in urls.enumerated() {
            do {
                var scan = FIDOScan(url: url, payload: try QRPayload(url: url))
                scan.otherCodes = urls.count - 1
                scan.invalidOtherCodes = index
                return scan
            } catch where index == 0 {
                firstRule = error.reason.isEmpty ? error.description : error.reason
            } catch {}
        }
        let none = urls.count == 1 ? "" : "none of the \(urls.count) FIDO:/ codes is valid; the first: "
        throw QRError(.invalidFIDOPayload, none + firstRule)
    }

    /// ``fido(from:)`` of what a scan found, with where it came from.
    static func fido(from found: Findings) throws(QRError) -> FIDOScan {
        var scan = try fido(from: found.texts)
        scan.kind = found.kind
        scan.unreadableNewerArt = found.unreadableNewer
        return scan
    }

    /// A short quote of decoded text for error messages: at most 40 characters, its control,
    /// line-separator and bidirectional characters and its backslashes escaped.
    static func preview(_ text: String) -> String {
        "\"" + HiddenCharacters.escaped(text, escapingBackslash: true, limit: 40) + "\""
    }
}
