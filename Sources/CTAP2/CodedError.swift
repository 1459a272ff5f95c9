/// An error identified by a stable ``code``, with a human ``reason``: the one shape of every error type
/// in the libraries (`CBORError`, `CTAP2Error`, `HybridError`, `RelyingPartyError`, `QRError`,
/// `RuntimeError`, `StoreError`, `WebAuthnJSONError`, `Ceremony.Failure`).
///
/// Two errors are equal, and hash alike, when their codes are; the reason is for people. So a test
/// matches a thrown error by code:
///
/// ```swift
/// #expect(throws: HybridError(.decryptionFailed)) { try session.open(message) }
/// ```
public protocol CodedError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The stable, machine-readable kind of failure.
    associatedtype Code: Hashable & Sendable
    /// What kind of failure this is.
    var code: Code { get }
    /// Which rule failed, for people. Never contains key material.
    var reason: String { get }
    /// An error of `code` with no further detail: the value tests match thrown errors against.
    init(_ code: Code)
}

extension CodedError {
    /// Equal when the codes are; the reason (and any diagnostic field) does not count.
    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }

    /// Hashes the code only, consistent with `==`.
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    /// `code: reason`, or the code alone when there is no reason.
    public var description: String { reason.isEmpty ? "\(code)" : "\(code): \(reason)" }
}
