import NIOHTTP1

/// An HTTP/1.x response head read from raw bytes (RFC 9112 §2, §4, §5): the client's WebSocket
/// upgrade (``ClientUpgradeHandler``) and the hand-written clients of the load generator and the
/// hostile soak (``HostileWire``) read the relay's answers with it. Strict where a hostile server
/// could otherwise crash or confuse the reader (a field name must be a token; `HTTP/1.x` and a
/// three-digit status), tolerant of bare LF line ends. Fuzzed by the `client-upgrade` target.
package enum ResponseHead {
    /// Where the head ends: its length without the blank line, and where the body starts. A bare LF
    /// is accepted as a line end (RFC 9112 §2.2).
    static func end(_ bytes: some Collection<UInt8>) -> (Int, Int)? {
        var index = 0
        var lineStart = 0
        for byte in bytes {
            index += 1
            guard byte == UInt8(ascii: "\n") else { continue }
            let line = index - 1 - lineStart
            if line == 0 || (line == 1 && bytes.dropFirst(lineStart).first == UInt8(ascii: "\r")) {
                return (lineStart, index)
            }
            lineStart = index
        }
        return nil
    }

    /// RFC 9110 §5.6.2 `tchar`: the bytes a header field name may have.
    package static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }

    /// The status line and header fields of a response head, or `nil` when it is not `HTTP/1.x`
    /// with a three-digit status and `name: value` fields (``read(_:)`` says why).
    static func parse(_ bytes: [UInt8]) -> HTTPResponseHead? {
        if case .success(let head) = read(bytes) { return head }
        return nil
    }

    /// Why a response head cannot be read: one line for people, e.g. `a header line without a
    /// colon ("Server nginx")`.
    struct Problem: Error, Equatable {
        let reason: String
    }

    /// The status line and header fields of a response head, or what is wrong with it. Parsed on
    /// the bytes (a `String` would see CR LF as one character, and Foundation's trimming is slow).
    /// A header line that starts with a space or tab continues the one before it (obs-fold): it is
    /// joined to it with one space, as RFC 9112 §5.2 tells a user agent to.
    static func read(_ bytes: [UInt8]) -> Result<HTTPResponseHead, Problem> {
        let (cr, lf, space, tab, colon) = (UInt8(ascii: "\r"), UInt8(ascii: "\n"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: ":"))
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        func quoted(_ line: some Collection<UInt8>) -> String { "\"" + PeerText.printable(bytes: line, limit: 40) + "\"" }
        var lines = bytes.split(separator: lf, omittingEmptySubsequences: false).map { $0.last == cr ? $0.dropLast() : $0 }
        while lines.last?.isEmpty == true { lines.removeLast() }
        // "HTTP/1.x SSS reason"
        guard let statusLine = lines.first, statusLine.starts(with: "HTTP/1.".utf8) else {
            return .failure(Problem(reason: "the status line is not HTTP/1.x (\(quoted(lines.first ?? [])))"))
        }
        let afterVersion = statusLine.dropFirst("HTTP/1.".utf8.count)
        let code = afterVersion.dropFirst(2).prefix(3)
        let afterCode = afterVersion.dropFirst(5)
        guard let minor = afterVersion.first, isDigit(minor), afterVersion.dropFirst().first == space,
            code.count == 3, code.allSatisfy(isDigit), code.first != UInt8(ascii: "0"), afterCode.first.map({ $0 == space }) ?? true
        else {
            return .failure(Problem(reason: "the status line is not HTTP/1.x with a three-digit status (\(quoted(statusLine)))"))
        }
        var fields: [(name: String, value: String)] = []
        for line in lines.dropFirst() {
            func trimmed(_ part: some Collection<UInt8>) -> String {
                let value = part.drop { $0 == space || $0 == tab }
                return String(decoding: value.prefix(value.reversed().drop { $0 == space || $0 == tab }.count), as: UTF8.self)
            }
            if let first = line.first, first == space || first == tab {
                guard !fields.isEmpty else {
                    return .failure(Problem(reason: "the first header line starts with a space (\(quoted(line)))"))
                }
                let more = trimmed(line)
                if !more.isEmpty { fields[fields.count - 1].value += (fields[fields.count - 1].value.isEmpty ? "" : " ") + more }
                continue
            }
            // A field name is a token (RFC 9110 §5.1): anything else (a non-ASCII byte trapped in
            // NIO's HTTPHeaders, found by fuzzing) means the answer is not HTTP.
            guard let split = line.firstIndex(of: colon) else {
                return .failure(Problem(reason: "a header line without a colon (\(quoted(line)))"))
            }
            guard split != line.startIndex, line[..<split].allSatisfy(isTokenByte) else {
                return .failure(Problem(reason: "a header name that is not a token (\(quoted(line[..<split])))"))
            }
            fields.append((String(decoding: line[..<split], as: UTF8.self), trimmed(line[(split + 1)...])))
        }
        var headers = HTTPHeaders()
        for field in fields { headers.add(name: field.name, value: field.value) }
        let status = code.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return .success(HTTPResponseHead(
            version: HTTPVersion(major: 1, minor: Int(minor - UInt8(ascii: "0"))),
            status: HTTPResponseStatus(statusCode: status, reasonPhrase: String(decoding: afterCode.dropFirst(), as: UTF8.self)),
            headers: headers))
    }

    /// Whether `bytes`, the start of an answer, can still become `HTTP/1.`: an answer that cannot
    /// (an SSH banner, an HTTP/2 frame, binary) is refused at once, not after the upgrade timeout.
    static func canStartStatusLine(_ bytes: some Collection<UInt8>) -> Bool {
        let expected = Array("HTTP/1.".utf8)
        return bytes.prefix(expected.count).elementsEqual(expected.prefix(min(bytes.count, expected.count)))
    }
}
