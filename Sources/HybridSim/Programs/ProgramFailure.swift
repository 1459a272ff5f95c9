import CTAP2
import HybridCore
import HybridFiles
import HybridQR
import HybridRuntime

/// Why `hybrid-sim desktop` or `hybrid-sim phone` failed: a kind (which fixes the exit status) and
/// one line for people. The CLI prints `error: <message>` on stderr and exits with ``exitCode``.
///
/// | kind | exit | meaning |
/// |---|---|---|
/// | ``Kind/failed`` | 1 | anything else (an internal error, a file that cannot be written, a store the machine fails: ``StoreError/isEnvironmentFailure``) |
/// | ``Kind/badInput`` | 2 | bad input found before any network traffic: options file, QR code, store file, conflicting settings |
/// | ``Kind/timeout`` | 3 | no nearby phone / no answer in time |
/// | ``Kind/refused`` | 4 | the phone refused the request (user said no, no passkey, no account chosen) |
/// | ``Kind/verificationFailed`` | 5 | the built-in relying party rejected the phone's answer |
/// | ``Kind/network`` | 6 | relay or socket trouble: cannot connect, port in use, tunnel closed |
/// | ``Kind/protocolError`` | 7 | the peer broke the hybrid protocol (handshake, decryption, framing) |
/// | ``Kind/linkRevoked`` | 8 | `--linked`: the relay answered 410, the phone revoked the link (it was removed from the links file) |
///
/// Command-line syntax errors are reported by the argument parser with exit status 64 (EX_USAGE).
public struct ProgramFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The family of failure; fixes the exit status.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// Exit 1: anything else (an internal error, a file that cannot be written).
        case failed
        /// Exit 2: bad input found before any network traffic (options file, QR code, store file,
        /// conflicting settings).
        case badInput
        /// Exit 3: no nearby phone, or no answer, in time.
        case timeout
        /// Exit 4: the phone refused the request (the user said no, no passkey, no account chosen).
        case refused
        /// Exit 5: the relying party rejected the phone's answer.
        case verificationFailed
        /// Exit 6: relay or socket trouble (cannot connect, port in use, tunnel closed).
        case network
        /// Exit 7: the peer broke the hybrid protocol (handshake, decryption, framing).
        case protocolError
        /// Exit 8: `--linked`: the phone revoked the link (the relay answered 410, or the listening
        /// phone refused the contact as revoked: close code 4410).
        case linkRevoked

        /// The process exit status for this kind.
        public var exitCode: Int32 {
            switch self {
            case .failed: return 1
            case .badInput: return 2
            case .timeout: return 3
            case .refused: return 4
            case .verificationFailed: return 5
            case .network: return 6
            case .protocolError: return 7
            case .linkRevoked: return 8
            }
        }
    }

    /// The family of failure.
    public var kind: Kind
    /// One line saying what failed and why (no `error:` prefix).
    public var message: String

    /// Creates a failure.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The process exit status.
    public var exitCode: Int32 { kind.exitCode }

    public var description: String { message }

    /// The exit status of a command-line syntax error (the argument parser's EX_USAGE).
    public static let usageExitCode: Int32 = 64
}

extension ProgramFailure {
    /// A failure of a session driver. `relayURL` names the relay in messages.
    static func fromTransaction(_ error: TransactionError, relayURL: String) -> ProgramFailure {
        let step = error.step
        switch error.underlying {
        case let failure as ProgramFailure:
            return failure
        case let runtime as RuntimeError:
            switch runtime.code {
            case .noNearbyAuthenticator:
                return ProgramFailure(.timeout, runtime.reason)
            case .timeout where runtime.unansweredUpgrade:
                // The connection was taken and the upgrade never answered: a relay stopped or overloaded.
                return ProgramFailure(
                    .timeout,
                    "\(step): \(runtime.reason) (the relay at \(relayURL) took the connection but did not answer: stopped, or overloaded?)")
            case .timeout:
                return ProgramFailure(.timeout, "\(step): \(runtime.reason)")
            case .connectionFailed:
                return ProgramFailure(
                    .network,
                    "cannot reach the relay at \(relayURL) (\(step)): \(connectionReason(runtime.reason))"
                )
            case .closed:
                let prefix = "tunnel closed with "
                let detail =
                    runtime.reason.hasPrefix(prefix) ? String(runtime.reason.dropFirst(prefix.count)) : runtime.reason
                // No close frame: the connection itself dropped, not a peer that ended the tunnel.
                let dropped = runtime.closeCode == .abnormalClosure
                    ? " (the connection to the relay at \(relayURL) dropped: the relay, or a proxy in front of it, stopped or restarted?)" : ""
                return ProgramFailure(.network, "the tunnel was closed while \(step): \(detail)\(dropped)")
            case .upgradeRejected, .handshakeFailed, .protocolViolation, .messageTooLarge, .bindFailed,
                .invalidAddress, .wrongAdvertLength, .wrongDatagramLength, .unknownServiceUUID:
                return ProgramFailure(.network, "\(step): \(runtime.reason)")
            case .invalidState:
                return ProgramFailure(.failed, "\(step): \(runtime.reason)")
            }
        case let hybrid as HybridError:
            return ProgramFailure(.protocolError, "\(step): \(hybrid.description)")
        default:
            return ProgramFailure(.failed, "\(step): \(error.underlying)")
        }
    }

    /// Any error thrown while a program ran, as a failure.
    static func from(_ error: any Error, relayURL: String) -> ProgramFailure {
        switch error {
        case let failure as ProgramFailure: return failure
        case let transaction as TransactionError: return fromTransaction(transaction, relayURL: relayURL)
        case let runtime as RuntimeError:
            switch runtime.code {
            case .timeout, .noNearbyAuthenticator: return ProgramFailure(.timeout, runtime.reason)
            case .invalidState: return ProgramFailure(.failed, runtime.reason)
            default: return ProgramFailure(.network, runtime.reason)
            }
        case let store as StoreError: return ProgramFailure(store.failureKind, store.description)
        case let qr as QRError: return ProgramFailure(.badInput, qr.description)
        case let hybrid as HybridError: return ProgramFailure(.protocolError, hybrid.description)
        case is CancellationError: return ProgramFailure(.failed, "cancelled")
        default: return ProgramFailure(.failed, "\(error)")
        }
    }

    /// "connection refused" instead of SwiftNIO's nested error description, when that is the cause.
    static func connectionReason(_ reason: String) -> String {
        let lowered = reason.lowercased()
        if lowered.contains("connection refused") || lowered.contains("errno: 111") || lowered.contains("errno: 61") {
            return "connection refused (nothing listens there: is the desktop or `hybrid-sim relay` running?)"
        }
        return reason
    }
}

extension StoreError {
    /// How a program reports a store it cannot use: bad input (exit 2) for the file's content or a
    /// path this user cannot use, a failure (exit 1) when the machine failed
    /// (``isEnvironmentFailure``: a full disk, the open-file limit, an I/O error).
    package var failureKind: ProgramFailure.Kind { isEnvironmentFailure ? .failed : .badInput }
}

extension FileFailure {
    /// How a program reports a file it cannot write (`--attestation-root-out`, `--qr-png`): a
    /// failure (exit 1) when the machine failed (a full disk, the open-file limit, an I/O error:
    /// ``StoreError/environmentErrors``, as for the stores), else bad input (exit 2: a path this
    /// user cannot use).
    package var failureKind: ProgramFailure.Kind {
        if case .system(let code) = self, StoreError.environmentErrors.contains(code) { return .failed }
        return .badInput
    }
}
