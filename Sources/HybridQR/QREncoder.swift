import CQRencode

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Builds QR symbols with libqrencode (`QRinput_new2` / `QRinput_append` / `QRcode_encodeInput`).
public enum QREncoder {
    /// The error-correction level used unless the caller asks for another one: **M** (≈ 15 %).
    ///
    /// The QR code is read by a phone camera off a screen. That channel suffers moiré between the
    /// display's pixel grid and the camera sensor, glare, blur from a moving hand, and screen
    /// scaling that makes some modules a pixel wider than others. Level L (≈ 7 %) leaves almost no
    /// margin for that; Q and H cost a lot of size. For a typical 168-digit desktop payload the
    /// symbol is version 4 (33 × 33) at L, **version 5 (37 × 37) at M**, version 7 (45 × 45) at Q
    /// and version 8 (49 × 49) at H (see `Docs/QR.md`). M buys twice L's correction for just four
    /// more modules per side, and a 37-module symbol is still coarse enough for a terminal (two
    /// module rows per text line: 23 lines with the quiet zone) and a phone at arm's length.
    /// Chromium's own caBLE QR generator also uses level M.
    public static let defaultErrorCorrection: QRErrorCorrection = .medium

    /// Encodes a `FIDO:/` URL as the smallest symbol the standard allows.
    ///
    /// The prefix and the digit run go in as two segments: `FIDO:/` in alphanumeric mode (all six
    /// characters are in the alphanumeric set; a lower-case prefix falls back to byte mode) and the
    /// digits in numeric mode. A 168-digit desktop payload then needs 620 bits instead of the
    /// 1 404 bits of byte mode.
    ///
    /// - Parameters:
    ///   - url: `FIDO:/` (any case) followed by ASCII digits only. The payload itself is not
    ///     checked here; use `QRPayload(url:)` for that.
    ///   - errorCorrection: the level; see ``defaultErrorCorrection``.
    /// - Throws: ``QRError/Code/invalidInput`` if `url` is not `FIDO:/` + digits,
    ///   ``QRError/Code/dataTooLarge`` if it does not fit into version 40.
    public static func encode(
        fidoURL url: String,
        errorCorrection: QRErrorCorrection = defaultErrorCorrection
    ) throws(QRError) -> QRMatrix {
        try encode(segments: segments(forFIDOURL: url), errorCorrection: errorCorrection)
    }

    /// Encodes arbitrary text as one byte-mode segment of its UTF-8 bytes.
    ///
    /// Used for anything that is not a `FIDO:/` URL (tests use `https://example.com` to check the
    /// "not a FIDO URL" path). No mode optimisation is done on purpose: what goes in is exactly
    /// the UTF-8 of `text`. Byte mode defaults to ISO-8859-1, so text with non-ASCII characters
    /// is preceded by an ECI 26 (UTF-8) header, which zbar and ZXing honour.
    ///
    /// - Throws: ``QRError/Code/invalidInput`` for empty text, ``QRError/Code/dataTooLarge`` if it
    ///   does not fit into version 40.
    public static func encode(
        text: String,
        errorCorrection: QRErrorCorrection = defaultErrorCorrection
    ) throws(QRError) -> QRMatrix {
        let bytes = Array(text.utf8)
        let eci: UInt32? = bytes.allSatisfy { $0 < 0x80 } ? nil : 26
        return try encode(segments: [QRSegment(bytes: bytes)], errorCorrection: errorCorrection, eci: eci)
    }

    /// Encodes explicit segments, in order, into the smallest version that holds them.
    ///
    /// - Throws: ``QRError/Code/invalidInput`` if there is nothing to encode,
    ///   ``QRError/Code/dataTooLarge`` if the data does not fit into version 40,
    ///   ``QRError/Code/libraryFailure`` if libqrencode fails otherwise.
    public static func encode(
        segments: [QRSegment],
        errorCorrection: QRErrorCorrection = defaultErrorCorrection
    ) throws(QRError) -> QRMatrix {
        try encode(segments: segments, errorCorrection: errorCorrection, eci: nil)
    }

    /// Encodes segments, optionally preceded by an ECI header (26 = UTF-8).
    static func encode(
        segments: [QRSegment],
        errorCorrection: QRErrorCorrection,
        eci: UInt32?
    ) throws(QRError) -> QRMatrix {
        let nonEmpty = segments.filter { !$0.bytes.isEmpty }
        guard !nonEmpty.isEmpty else { throw QRError(.invalidInput, "nothing to encode") }
        guard let input = QRinput_new2(0, errorCorrection.cLevel) else {
            throw QRError(.libraryFailure, "QRinput_new2 failed (errno \(errno))")
        }
        defer { QRinput_free(input) }
        if let eci, QRinput_appendECIheader(input, eci) != 0 {
            throw QRError(.libraryFailure, "QRinput_appendECIheader failed (errno \(errno))")
        }
        for segment in nonEmpty {
            guard segment.bytes.count <= 7_089 else {
                throw QRError(.dataTooLarge, "a \(segment.mode) segment of \(segment.bytes.count) characters")
            }
            let status = segment.bytes.withUnsafeBufferPointer {
                QRinput_append(input, segment.mode.cMode, Int32($0.count), $0.baseAddress)
            }
            guard status == 0 else {
                throw QRError(.invalidInput, "libqrencode rejected a \(segment.mode) segment (errno \(errno))")
            }
        }
        errno = 0
        guard let code = QRcode_encodeInput(input) else {
            if errno == ERANGE {
                throw QRError(.dataTooLarge, "does not fit into version 40 at level \(errorCorrection)")
            }
            throw QRError(.libraryFailure, "QRcode_encodeInput failed (errno \(errno))")
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        guard let data = code.pointee.data, width > 0 else {
            throw QRError(.libraryFailure, "libqrencode returned an empty symbol")
        }
        // Bit 0 of each byte is the module colour; the other bits are libqrencode bookkeeping.
        let modules = (0..<(width * width)).map { data[$0] & 1 == 1 }
        return try QRMatrix(version: Int(code.pointee.version), errorCorrection: errorCorrection, modules: modules)
    }

    /// Splits a `FIDO:/` URL into its prefix segment and its numeric segment.
    ///
    /// - Throws: ``QRError/Code/invalidInput`` unless the text is `FIDO:/` (any case) + digits.
    public static func segments(forFIDOURL url: String) throws(QRError) -> [QRSegment] {
        let utf8 = Array(url.utf8)
        let prefix = Array(FIDOURL.prefix.utf8)
        guard FIDOURL.hasPrefix(url) else {
            throw QRError(.invalidInput, "the text does not start with \(FIDOURL.prefix)")
        }
        let head = String(decoding: utf8[..<prefix.count], as: UTF8.self)
        let digits = String(decoding: utf8[prefix.count...], as: UTF8.self)
        let headSegment =
            head == FIDOURL.prefix ? try QRSegment(.alphanumeric, head) : QRSegment(bytes: Array(head.utf8))
        do {
            return [headSegment, try QRSegment(.numeric, digits)]
        } catch {
            throw QRError(.invalidInput, "the text after \(FIDOURL.prefix) must be digits only (\(error.reason))")
        }
    }
}

extension QRErrorCorrection {
    /// The libqrencode constant for this level.
    var cLevel: QRecLevel {
        switch self {
        case .low: QR_ECLEVEL_L
        case .medium: QR_ECLEVEL_M
        case .quartile: QR_ECLEVEL_Q
        case .high: QR_ECLEVEL_H
        }
    }
}

extension QRSegment.Mode {
    /// The libqrencode constant for this mode.
    var cMode: QRencodeMode {
        switch self {
        case .numeric: QR_MODE_NUM
        case .alphanumeric: QR_MODE_AN
        case .byte: QR_MODE_8
        }
    }
}
