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
    /// with a three-digit status and `name: value` fields. Parsed on the bytes (a `String` would
    /// see CR LF as one character, and Foundation's trimming is slow).
    static func parse(_ bytes: [UInt8]) -> HTTPResponseHead? {
        let (cr, lf, space, tab, colon) = (UInt8(ascii: "\r"), UInt8(ascii: "\n"), UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: ":"))
        let isDigit = { (byte: UInt8) in (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
        var lines = bytes.split(separator: lf, omittingEmptySubsequences: false).map { $0.last == cr ? $0.dropLast() : $0 }
        while lines.last?.isEmpty == true { lines.removeLast() }
        // "HTTP/1.x SSS reason"
        guard let statusLine = lines.first, statusLine.starts(with: "HTTP/1.".utf8) else { return nil }
        let afterVersion = statusLine.dropFirst("HTTP/1.".utf8.count)
        guard let minor = afterVersion.first, isDigit(minor), afterVersion.dropFirst().first == space else { return nil }
        let code = afterVersion.dropFirst(2).prefix(3)
        let afterCode = afterVersion.dropFirst(5)
        guard code.count == 3, code.allSatisfy(isDigit), code.first != UInt8(ascii: "0"), afterCode.first.map({ $0 == space }) ?? true
        else { return nil }
        var headers = HTTPHeaders()
        for line in lines.dropFirst() {
            // A field name is a token (RFC 9110 §5.1): anything else (a non-ASCII byte trapped in
            // NIO's HTTPHeaders, found by fuzzing) means the answer is not HTTP.
            guard let split = line.firstIndex(of: colon), split != line.startIndex,
                line[..<split].allSatisfy(isTokenByte)
            else { return nil }
            let value = line[(split + 1)...].drop { $0 == space || $0 == tab }
            let trimmed = value.reversed().drop { $0 == space || $0 == tab }.count
            headers.add(
                name: String(decoding: line[..<split], as: UTF8.self),
                value: String(decoding: value.prefix(trimmed), as: UTF8.self))
        }
        let status = code.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return HTTPResponseHead(
            version: HTTPVersion(major: 1, minor: Int(minor - UInt8(ascii: "0"))),
            status: HTTPResponseStatus(statusCode: status, reasonPhrase: String(decoding: afterCode.dropFirst(), as: UTF8.self)),
            headers: headers)
    }
}
