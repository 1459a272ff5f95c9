#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The time at the start of a long-running program's progress lines, as swift-log's stream handler
/// writes it at the start of the relay's log lines: local time, ISO 8601 to the second with the
/// zone's offset, e.g. `2026-11-27T16:56:31+0000`. A relay's log and a listening phone's lines
/// written side by side then read in one order.
package enum LogTime {
    /// `now` (default: the current time) in that form.
    package static func stamp(_ now: time_t = time(nil)) -> String {
        var now = now
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [Int8](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `line` without a leading stamp and its space, if it has one (a program that relays another's
    /// lines, as `demo` does the listening phone's, and tests).
    package static func strip(_ line: String) -> String {
        let bytes = Array(line.utf8)
        // yyyy-mm-ddThh:mm:ss±hhmm and a space: 25 bytes.
        guard bytes.count >= 25, bytes[24] == UInt8(ascii: " ") else { return line }
        let shape = Array("dddd-dd-ddTdd:dd:dd+dddd".utf8)
        for (byte, expected) in zip(bytes, shape) {
            switch expected {
            case UInt8(ascii: "d"): guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return line }
            case UInt8(ascii: "+"): guard byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") else { return line }
            default: guard byte == expected else { return line }
            }
        }
        return String(decoding: bytes[25...], as: UTF8.self)
    }
}
