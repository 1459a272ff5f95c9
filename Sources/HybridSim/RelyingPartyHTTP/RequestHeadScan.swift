import NIOCore

/// What ``RequestHeadWatch`` learns from a request head's raw bytes, line by line, before the
/// parser has read it: how long its request line is, how many header fields follow, and where the
/// head ends (an empty line). Empty lines before the request line are skipped, as the parser skips them.
struct RequestHeadScan {
    /// The request line ended (a line feed arrived).
    private(set) var requestLineEnded = false
    /// The bytes before the request line's line feed (so far, while it has not ended).
    private(set) var requestLineBytes = 0
    /// The header-field lines that ended so far.
    private(set) var headerFields = 0
    /// The empty line that ends the head arrived: nothing more is scanned.
    private(set) var headEnded = false
    /// The bytes scanned, up to the end of the head.
    private(set) var headBytes = 0
    /// The bytes of the current header-field line so far (carriage returns not counted).
    private var lineBytes = 0

    /// Reads `bytes`, the next ones of the connection, up to the end of the head.
    mutating func read(_ bytes: ByteBufferView) {
        for byte in bytes {
            guard !headEnded else { return }
            headBytes += 1
            if !requestLineEnded {
                if byte == UInt8(ascii: "\n") {
                    if requestLineBytes > 0 { requestLineEnded = true }
                } else if byte != UInt8(ascii: "\r") || requestLineBytes > 0 {
                    requestLineBytes += 1
                }
            } else if byte == UInt8(ascii: "\n") {
                if lineBytes == 0 { headEnded = true } else { headerFields += 1 }
                lineBytes = 0
            } else if byte != UInt8(ascii: "\r") {
                lineBytes += 1
            }
        }
    }
}
