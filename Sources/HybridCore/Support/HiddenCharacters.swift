extension Unicode.Scalar {
    /// Whether this is a character that can break or disguise a line of text a peer chose: a
    /// control character (C0, DEL, C1), a line or paragraph separator, or a bidirectional mark,
    /// embedding, override or isolate. Every place that shows peer text (`PeerText` in messages,
    /// `inspect`'s diagrams, `qr scan`'s terminal output and its errors) escapes exactly these,
    /// through ``HiddenCharacters/escaped(_:keeping:escapingBackslash:limit:)``.
    package var isHiddenInPeerText: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x061C: return true  // bidi marks, embeddings, overrides, isolates
        default: return false
        }
    }

    /// This scalar as a Swift-style escape of its code point in upper-case hex: `\u{1B}`.
    package var swiftEscape: String {
        "\\u{" + String(value, radix: 16, uppercase: true) + "}"
    }
}

/// The one way text that someone else chose (a peer's close reason, a decoded QR code) is made
/// safe to show: every ``Swift/Unicode/Scalar/isHiddenInPeerText`` character written as `\u{XX}`.
package enum HiddenCharacters {
    /// `text` with every hidden character (``Swift/Unicode/Scalar/isHiddenInPeerText``) but those
    /// in `keeping` written as ``Swift/Unicode/Scalar/swiftEscape``; everything else stays.
    ///
    /// - Parameters:
    ///   - keeping: hidden characters to leave as they are (a line feed and a tab in a multi-line
    ///     text printed as such).
    ///   - escapingBackslash: whether a backslash is written `\\`, so that a literal `\u{1B}` in
    ///     the text cannot pass for an escaped ESC. Off where text is escaped more than once
    ///     (`PeerText.printable` must stay idempotent).
    ///   - limit: the most characters of `text` to keep, then "…"; `nil` for all.
    package static func escaped(
        _ text: some StringProtocol, keeping: Set<Unicode.Scalar> = [], escapingBackslash: Bool, limit: Int? = nil
    ) -> String {
        replacing(text, limit: limit) { scalar in
            if scalar.isHiddenInPeerText && !keeping.contains(scalar) { return scalar.swiftEscape }
            return escapingBackslash && scalar == "\\" ? "\\\\" : nil
        }
    }

    /// The first `limit` scalars of `text` (`nil`: all), each as `replacement` gives it (`nil`: as
    /// it is), with "…" when there were more: the loop under ``escaped(_:keeping:escapingBackslash:limit:)``
    /// and the log lines' stricter escaping (`PeerText.loggable`).
    package static func replacing(
        _ text: some StringProtocol, limit: Int?, _ replacement: (Unicode.Scalar) -> String?
    ) -> String {
        var result = ""
        var count = 0
        for scalar in text.unicodeScalars {
            if count == limit { return result + "…" }
            if let replaced = replacement(scalar) {
                result += replaced
            } else {
                result.unicodeScalars.append(scalar)
            }
            count += 1
        }
        return result
    }
}
