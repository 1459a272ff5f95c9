/// A strict, bounded JSON reader (RFC 8259) over UTF-8 bytes. It rejects invalid UTF-8, unescaped
/// control characters, lone surrogate escapes, duplicate object members, trailing garbage and
/// nesting deeper than a limit (``maxDepth`` for client data). It never traps, and its time is
/// linear in the input.
package struct JSONReader {
    /// Deepest nesting of arrays and objects accepted in client data.
    static let maxDepth = 16

    private let bytes: [UInt8]
    private let depthLimit: Int
    private let subject: String
    private var offset = 0

    /// Parses one JSON text spanning the whole input: client data JSON by default; `subject` names
    /// the text in errors ("client data JSON: … at offset N"; empty: no name), `maxDepth` bounds its nesting.
    package static func parse(
        _ input: some Collection<UInt8>, maxDepth: Int = maxDepth, subject: String = "client data JSON"
    ) throws(CTAP2Error) -> Value {
        var reader = JSONReader(bytes: Array(input), depthLimit: maxDepth, subject: subject)
        reader.skipWhitespace()
        let value = try reader.readValue(depth: 0)
        reader.skipWhitespace()
        guard reader.offset == reader.bytes.count else { throw reader.error("trailing characters") }
        return value
    }

    private init(bytes: [UInt8], depthLimit: Int, subject: String) {
        self.bytes = bytes
        self.depthLimit = depthLimit
        self.subject = subject
    }

    /// The failure, after `subject: ` unless the subject is empty (a caller that names the
    /// failure itself, as a store error does with "not JSON").
    private func error(_ what: String) -> CTAP2Error {
        CTAP2Error(.invalidJSON, (subject.isEmpty ? "" : "\(subject): ") + "\(what) at offset \(offset)")
    }

    private var current: UInt8? { offset < bytes.count ? bytes[offset] : nil }

    private mutating func skipWhitespace() {
        while let c = current, c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D { offset += 1 }
    }

    private mutating func expect(_ literal: String) throws(CTAP2Error) {
        for byte in literal.utf8 {
            guard current == byte else { throw error("expected \(literal)") }
            offset += 1
        }
    }

    private mutating func readValue(depth: Int) throws(CTAP2Error) -> Value {
        guard let c = current else { throw error("unexpected end of input") }
        switch c {
        case UInt8(ascii: "{"): return try readObject(depth: depth)
        case UInt8(ascii: "["): return try readArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try readNumber())
        default: throw error("unexpected character 0x\(Hex.encode([c]))")
        }
    }

    private mutating func readObject(depth: Int) throws(CTAP2Error) -> Value {
        guard depth < depthLimit else { throw error("nesting deeper than \(depthLimit)") }
        offset += 1  // {
        var members: [(name: String, value: Value)] = []
        // Names compare by their UTF-8 bytes: `String` equality would merge canonically equivalent names.
        var names = Set<[UInt8]>()
        skipWhitespace()
        if current == UInt8(ascii: "}") {
            offset += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard current == UInt8(ascii: "\"") else { throw error("expected a member name") }
            let name = try readString()
            guard names.insert(Array(name.utf8)).inserted else { throw error("duplicate member \"\(name)\"") }
            skipWhitespace()
            try expect(":")
            skipWhitespace()
            members.append((name, try readValue(depth: depth + 1)))
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                offset += 1
            } else {
                try expect("}")
                return .object(members)
            }
        }
    }

    private mutating func readArray(depth: Int) throws(CTAP2Error) -> Value {
        guard depth < depthLimit else { throw error("nesting deeper than \(depthLimit)") }
        offset += 1  // [
        var elements: [Value] = []
        skipWhitespace()
        if current == UInt8(ascii: "]") {
            offset += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try readValue(depth: depth + 1))
            skipWhitespace()
            if current == UInt8(ascii: ",") {
                offset += 1
            } else {
                try expect("]")
                return .array(elements)
            }
        }
    }

    private mutating func readNumber() throws(CTAP2Error) -> String {
        let start = offset
        if current == UInt8(ascii: "-") { offset += 1 }
        guard let first = current, isDigit(first) else { throw error("malformed number") }
        offset += 1
        if first != UInt8(ascii: "0") { skipDigits() }
        if current == UInt8(ascii: ".") {
            offset += 1
            guard let c = current, isDigit(c) else { throw error("malformed number") }
            skipDigits()
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            offset += 1
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { offset += 1 }
            guard let c = current, isDigit(c) else { throw error("malformed number") }
            skipDigits()
        }
        return String(decoding: bytes[start..<offset], as: UTF8.self)
    }

    private func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private mutating func skipDigits() {
        while let c = current, isDigit(c) { offset += 1 }
    }

    /// Reads a string starting at its opening quote.
    private mutating func readString() throws(CTAP2Error) -> String {
        offset += 1  // "
        var scalars = String.UnicodeScalarView()
        while true {
            guard let c = current else { throw error("unterminated string") }
            switch c {
            case UInt8(ascii: "\""):
                offset += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                offset += 1
                scalars.append(try readEscape())
            case 0x00..<0x20:
                throw error("unescaped control character in a string")
            default:
                scalars.append(try readUTF8Scalar())
            }
        }
    }

    private mutating func readEscape() throws(CTAP2Error) -> Unicode.Scalar {
        guard let c = current else { throw error("unterminated escape") }
        offset += 1
        switch c {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try readHex4()
            switch unit {
            case 0xD800..<0xDC00:
                // A string cut inside a character's UTF-16 pair (JavaScript's `.slice(0, 64)` of an
                // emoji): a browser's JSON.parse takes it; refused here, and said so.
                let unpaired = "unpaired surrogate escape (\\u\(String(unit, radix: 16, uppercase: true)) without the low half of its pair)"
                guard current == UInt8(ascii: "\\"), offset + 1 < bytes.count, bytes[offset + 1] == UInt8(ascii: "u") else {
                    throw error(unpaired)
                }
                offset += 2
                let low = try readHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error(unpaired) }
                let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
                guard let scalar = Unicode.Scalar(value) else { throw error("invalid surrogate pair") }
                return scalar
            case 0xDC00..<0xE000:
                throw error("unpaired surrogate escape")
            default:
                guard let scalar = Unicode.Scalar(unit) else { throw error("invalid \\u escape") }
                return scalar
            }
        default:
            throw error("invalid escape \\\(Character(Unicode.Scalar(c)))")
        }
    }

    private mutating func readHex4() throws(CTAP2Error) -> UInt32 {
        guard bytes.count - offset >= 4 else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[offset]
            let digit: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = c - UInt8(ascii: "A") + 10
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | UInt32(digit)
            offset += 1
        }
        return value
    }

    /// Decodes one UTF-8 encoded scalar (RFC 3629: shortest form, no surrogates, at most U+10FFFF).
    private mutating func readUTF8Scalar() throws(CTAP2Error) -> Unicode.Scalar {
        let lead = bytes[offset]
        let count: Int
        let minimum: UInt32
        var value: UInt32
        switch lead {
        case 0x00..<0x80: offset += 1; return Unicode.Scalar(lead)
        case 0xC2..<0xE0: count = 2; minimum = 0x80; value = UInt32(lead & 0x1F)
        case 0xE0..<0xF0: count = 3; minimum = 0x800; value = UInt32(lead & 0x0F)
        case 0xF0..<0xF5: count = 4; minimum = 0x10000; value = UInt32(lead & 0x07)
        default: throw error("invalid UTF-8")
        }
        guard bytes.count - offset >= count else { throw error("truncated UTF-8") }
        for i in 1..<count {
            let next = bytes[offset + i]
            guard next & 0xC0 == 0x80 else { throw error("invalid UTF-8") }
            value = value << 6 | UInt32(next & 0x3F)
        }
        guard value >= minimum, let scalar = Unicode.Scalar(value) else { throw error("invalid UTF-8") }
        offset += count
        return scalar
    }
}

extension JSONReader {
    /// A JSON value as read by ``JSONReader``: enough of RFC 8259 to parse client data JSON strictly.
    package enum Value: Equatable {
        case string(String)
        case number(String)
        case bool(Bool)
        case null
        case array([Value])
        /// Members in document order; duplicates are rejected by the reader.
        case object([(name: String, value: Value)])

        package static func == (lhs: Value, rhs: Value) -> Bool {
            switch (lhs, rhs) {
            case (.string(let a), .string(let b)): return a == b
            case (.number(let a), .number(let b)): return a == b
            case (.bool(let a), .bool(let b)): return a == b
            case (.null, .null): return true
            case (.array(let a), .array(let b)): return a == b
            case (.object(let a), .object(let b)):
                return a.count == b.count && zip(a, b).allSatisfy { $0.name == $1.name && $0.value == $1.value }
            default: return false
            }
        }

        /// A short name of the value's type for error reasons.
        package var kindName: String {
            switch self {
            case .string: return "a string"
            case .number: return "a number"
            case .bool: return "a boolean"
            case .null: return "null"
            case .array: return "an array"
            case .object: return "an object"
            }
        }
    }
}
