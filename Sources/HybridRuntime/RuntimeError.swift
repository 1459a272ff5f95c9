import CTAP2
import HybridCore
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The one error type of the networked runtime (relay, WebSocket transport, proximity stub).
///
/// Compare errors by ``code``; ``reason`` is a human sentence meant for a log line or a CLI message,
/// and the optional fields carry the machine-readable details (HTTP status of a rejected upgrade,
/// WebSocket close code, proximity counters).
public struct RuntimeError: CodedError {
    /// What went wrong, as a stable machine-readable value.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// A URL, host or endpoint string could not be parsed or is not allowed (e.g. not loopback).
        case invalidAddress
        /// The TCP connection could not be established (refused, unreachable).
        case connectionFailed
        /// The tunnel service answered the WebSocket upgrade with a non-101 HTTP status (see ``httpStatus``).
        case upgradeRejected
        /// The tunnel service accepted the upgrade but broke the caBLE rules
        /// (no `fido.cable` subprotocol, malformed `X-caBLE-Routing-ID`).
        case handshakeFailed
        /// An operation did not finish before its deadline.
        case timeout
        /// The WebSocket was closed; ``closeCode`` and ``reason`` say by whom and why.
        case closed
        /// The peer broke the WebSocket or tunnel rules (text frame, unmasked frame, bad fragment).
        case protocolViolation
        /// A message exceeded the configured size limit.
        case messageTooLarge
        /// A proximity datagram did not have exactly 23 bytes.
        case wrongDatagramLength
        /// A proximity datagram named a service UUID other than 0xFFF9 or 0xFDE2.
        case unknownServiceUUID
        /// An advert did not have exactly 20 bytes.
        case wrongAdvertLength
        /// The proximity scanner saw no matching advert before its deadline (see ``proximityStatistics``).
        case noNearbyAuthenticator
        /// A socket could not be bound (port in use, bad address).
        case bindFailed
        /// The object was used in the wrong state (not started, already started, stopped, concurrent receive).
        case invalidState
    }

    /// What went wrong.
    public var code: Code
    /// A complete human-readable sentence describing the failure.
    public var reason: String
    /// The HTTP status of a rejected WebSocket upgrade (``Code/upgradeRejected``).
    public var httpStatus: Int?
    /// The WebSocket close code, for ``Code/closed`` and for errors that closed the tunnel.
    public var closeCode: WebSocketCloseCode?
    /// The scanner's counters at the time of a ``Code/noNearbyAuthenticator`` timeout.
    public var proximityStatistics: ProximityStatistics?
    /// A WebSocket upgrade the relay took the TCP connection for and never answered: no response
    /// head within the timeout, or the connection closed before one (`WebSocketTunnel.open`'s
    /// `.timeout` and `.handshakeFailed` of that kind; an answer that came and was wrong is not one).
    package var unansweredUpgrade = false
    /// The `errno` of a failed socket call behind a ``Code/bindFailed`` (`EADDRINUSE`, `EMFILE`),
    /// when known: what to advise depends on it (``BindConflict/portAdvice(errno:port:flag:)``).
    package var systemErrno: CInt?

    /// An error of `code` with no reason, the value tests match thrown errors against.
    public init(_ code: Code) { self.init(code, "") }

    /// Creates an error; prefer the static factories below.
    public init(
        _ code: Code,
        _ reason: String,
        httpStatus: Int? = nil,
        closeCode: WebSocketCloseCode? = nil,
        proximityStatistics: ProximityStatistics? = nil
    ) {
        self.code = code
        self.reason = reason
        self.httpStatus = httpStatus
        self.closeCode = closeCode
        self.proximityStatistics = proximityStatistics
    }

    /// The human message: the reason sentence, which already names the operation and the cause.
    public var description: String { reason }
}

// MARK: - Factories

extension RuntimeError {
    /// The system's reason for a failed socket call, as a CLI line words it ("address already in
    /// use", "permission denied"), instead of SwiftNIO's `IOError` text (which names the C call and
    /// the errno); any other error as it describes itself.
    ///
    /// A connection attempt through NIO's resolver reports the first address's failure.
    package static func systemReason(_ error: any Error) -> String {
        if let error = error as? IOError {
            return systemReason(errno: error.errnoCode)
        }
        if let error = error as? ChannelError, [.eof, .ioOnClosedChannel, .alreadyClosed].contains(error) {
            // SwiftNIO's "End of file": the other end closed the connection before answering.
            return "the server closed the connection without answering"
        }
        if let error = error as? SocketAddressError.UnknownHost {
            // NIO's text names its type and getaddrinfo's code; the resolver's own words stay.
            return "the host name \(error.host) could not be resolved (\(error.errorDescription.lowercased()))"
        }
        if let error = error as? NIOConnectionError {
            if let first = error.connectionErrors.first { return systemReason(first.error) }
            // Nothing to connect to: the name lookup failed (NIO's text names its own types).
            if error.dnsAError != nil || error.dnsAAAAError != nil { return "the host name \(error.host) does not resolve" }
        }
        return "\(error)"
    }

    /// The system's reason for `errno`, worded as ``systemReason(_:)`` words it.
    package static func systemReason(errno code: CInt) -> String {
        String(cString: strerror(code)).lowercased()
    }

    /// The WebSocket was closed with `code` and `reason` (by the peer, the relay, or locally). The
    /// reason is the peer's text: control characters in it are escaped (`PeerText`).
    public static func closed(_ code: WebSocketCloseCode, _ reason: String) -> RuntimeError {
        let why = reason.isEmpty ? "" : ": \(PeerText.printable(reason))"
        return RuntimeError(.closed, "tunnel closed with \(code)\(why)", closeCode: code)
    }

    /// `operation` did not finish within `duration`.
    public static func timeout(_ operation: String, after duration: Duration) -> RuntimeError {
        RuntimeError(.timeout, "\(operation) timed out after \(duration.humanReadable)")
    }


    /// The relay refused the upgrade of `path` with `status`; `detail` is the response body if any
    /// (its first line is the relay's explanation).
    /// The reason phrase and the body are the relay's text: control characters are escaped.
    /// A body that is an HTML page (`<html>…`) is not a relay's text (a relay answers `text/plain`):
    /// a gateway's 502, 503 or 504 is a proxy in front of the relay, said in words; any other status
    /// is said as what answered (the status line, the page's title) and that it is no tunnel service.
    static func upgradeRejected(path: String, status: Int, statusText: String, detail: String?) -> RuntimeError {
        let endpoint = TunnelServicePath.endpointName(of: path)
        let statusLine = "\(status) \(PeerText.printable(statusText))"
        let html = detail.map { $0.drop { $0.isWhitespace }.hasPrefix("<") } ?? false
        let gateway = html ? TunnelServicePath.explainGateway(status: status) : nil
        var text: String
        if html, gateway == nil {
            text = TunnelServicePath.notATunnelService(endpoint: endpoint, statusLine: statusLine, page: detail ?? "")
        } else {
            let explanation =
                gateway
                ?? detail.flatMap { $0.split(whereSeparator: \.isNewline).first }.flatMap { $0.isEmpty ? nil : PeerText.printable($0) }
                ?? TunnelServicePath.explain(status: status, endpoint: endpoint)
            text = "relay rejected \(endpoint): \(statusLine)"
            if let explanation { text += " (\(explanation))" }
        }
        // Answers that are no refusal of a tunnel service: what the URL probably is instead.
        switch status {
        case 200..<300 where !html:
            text += "; a tunnel service answers 101 (switching to WebSocket): is the relay URL a caBLE tunnel service?"
        case 300..<400:
            text += "; redirects are not followed: give the relay's own URL"
        default:
            break
        }
        return RuntimeError(.upgradeRejected, text, httpStatus: status)
    }
}

extension Duration {
    /// "100 ms", "2.5 s", "120 s": for messages.
    var humanReadable: String {
        let (seconds, attoseconds) = components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        if milliseconds < 1000 { return "\(milliseconds) ms" }
        if milliseconds % 1000 == 0 { return "\(milliseconds / 1000) s" }
        return "\(Double(milliseconds) / 1000) s"
    }
}
