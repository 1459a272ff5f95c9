import Foundation
import NIOCore
import NIOHTTP1

/// What a server learns from a request head's raw bytes, line by line, before SwiftNIO's HTTP
/// parser has read it (`rp`'s `RequestHeadWatch`, the relay's ``FirstRequestDecoder``): how long its request line is, how many header fields follow, where the head
/// ends (an empty line), and what the parser's vaguer errors were about (a line ending in a bare LF,
/// the `Transfer-Encoding` and `Content-Length` fields). Empty lines before the request line are
/// skipped, as the parser skips them.
package struct RequestHeadScan: Equatable {
    /// The request line ended (a line feed arrived).
    package private(set) var requestLineEnded = false
    /// The bytes before the request line's line feed (so far, while it has not ended).
    package private(set) var requestLineBytes = 0
    /// The header-field lines that ended so far.
    package private(set) var headerFields = 0
    /// The empty line that ends the head arrived: nothing more is scanned.
    package private(set) var headEnded = false
    /// The bytes scanned, up to the end of the head.
    package private(set) var headBytes = 0
    /// A line of the head ended with a line feed alone, not CRLF.
    package private(set) var bareLineFeed = false
    /// The values of the `Transfer-Encoding` fields (each cut to 256 bytes).
    package private(set) var transferEncodings: [String] = []
    /// A `Content-Length` field arrived.
    package private(set) var contentLength = false
    /// The bytes of the current header-field line so far (carriage returns not counted).
    private var lineBytes = 0
    /// The start of the current header-field line (the most a `Transfer-Encoding` field keeps).
    private var line: [UInt8] = []
    private var previous: UInt8 = 0

    package init() {}

    /// Reads `bytes`, the next ones of the connection, up to the end of the head.
    package mutating func read(_ bytes: ByteBufferView) {
        for byte in bytes {
            guard !headEnded else { return }
            headBytes += 1
            defer { previous = byte }
            if !requestLineEnded {
                if byte == UInt8(ascii: "\n") {
                    if requestLineBytes > 0 {
                        requestLineEnded = true
                        if previous != UInt8(ascii: "\r") { bareLineFeed = true }
                    }
                } else if byte != UInt8(ascii: "\r") || requestLineBytes > 0 {
                    requestLineBytes += 1
                }
            } else if byte == UInt8(ascii: "\n") {
                if previous != UInt8(ascii: "\r") { bareLineFeed = true }
                if lineBytes == 0 {
                    headEnded = true
                } else {
                    headerFields += 1
                    endField()
                }
                lineBytes = 0
                line.removeAll(keepingCapacity: true)
            } else if byte != UInt8(ascii: "\r") {
                lineBytes += 1
                if line.count < Self.keptLineBytes { line.append(byte) }
            }
        }
    }

    /// The most bytes of a header-field line kept: `Transfer-Encoding:` and 256 of its value.
    private static let keptLineBytes = 18 + 256

    /// Notes the field that just ended if it is `Transfer-Encoding` or `Content-Length`.
    private mutating func endField() {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = String(decoding: line[..<colon], as: UTF8.self).lowercased()
        if name == "transfer-encoding" {
            transferEncodings.append(String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: .whitespaces))
        } else if name == "content-length" {
            contentLength = true
        }
    }

    /// Why the parser refused the head, from its framing fields and line ends, when they say:
    /// `Content-Length` with `Transfer-Encoding`, `chunked` named twice or not last, or a bare LF.
    package var framingFault: String? {
        let codings = transferEncodings.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if !transferEncodings.isEmpty, contentLength {
            return "Content-Length and Transfer-Encoding together: the body's length would be ambiguous (RFC 9112 §6.3)"
        }
        if codings.filter({ $0 == "chunked" }).count > 1 {
            return "Transfer-Encoding names chunked more than once (RFC 9112 §7.1)"
        }
        if let last = codings.last, last != "chunked" {
            return "Transfer-Encoding's last coding is \(last), not chunked: the body's length cannot be known (RFC 9112 §6.3)"
        }
        if bareLineFeed {
            return "a line of the head ends with a bare LF: HTTP/1.1 lines end with CRLF (RFC 9112 §2.2)"
        }
        return nil
    }

    /// Why the parser refused the head with `error`, in words, when its own complaint is vague
    /// (llhttp reports `Transfer-Encoding` faults as `unknown`, a request line ending in a bare LF as
    /// `invalidVersion`): the ``framingFault`` this scan saw, or for `invalidVersion` the version rule;
    /// `nil` when neither says more. Shared by the relay's and `rp`'s refusals.
    package func reason(for error: HTTPParserError) -> String? {
        switch error {
        case .unknown, .unexpectedContentLength, .invalidContentLength, .invalidVersion, .lfExpected, .invalidChunkSize:
            if let framingFault { return framingFault }
            return error == .invalidVersion ? "the request line does not end with HTTP/1.0 or HTTP/1.1" : nil
        default:
            return nil
        }
    }
}
