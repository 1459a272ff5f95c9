/// One `--json` event line: a JSON object whose members keep the order they were given in
/// (`event` first), written on one line.
package struct JSONLine: Sendable {
    /// A member value.
    package enum Value: Sendable {
        case string(String)
        case int(Int)
        case bool(Bool)
        /// Already-encoded JSON (e.g. the credential), inserted as is.
        case raw(String)
    }

    private var members: [(String, Value)]

    /// An event object `{"event": name, …}`.
    package init(event name: String, _ members: [(String, Value)] = []) {
        self.members = [("event", .string(name))] + members
    }

    /// The members of an `error` event after `flow`: `kind`, `exitCode`, `message`.
    package static func errorMembers(kind: String, exitCode: Int32, message: String) -> [(String, Value)] {
        [("kind", .string(kind)), ("exitCode", .int(Int(exitCode))), ("message", .string(message))]
    }

    /// The members of the `error` event for `failure`.
    static func errorMembers(_ failure: ProgramFailure) -> [(String, Value)] {
        errorMembers(kind: failure.kind.rawValue, exitCode: failure.exitCode, message: failure.message)
    }

    /// The compact JSON text.
    package var text: String {
        "{" + members.map { key, value in "\(Self.quote(key)):\(Self.encode(value))" }.joined(separator: ",") + "}"
    }

    private static func encode(_ value: Value) -> String {
        switch value {
        case .string(let text): return quote(text)
        case .int(let number): return String(number)
        case .bool(let flag): return flag ? "true" : "false"
        case .raw(let json): return json
        }
    }

    /// A JSON string literal (RFC 8259 §7): quote, backslash and control characters escaped.
    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case let c where c.value < 0x20:
                let hex = String(c.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
