import HybridCore

/// What a successful `hybrid-sim phone` run did.
public struct PhoneResult: Sendable {
    /// The request the phone answered.
    public enum Outcome: Sendable, Hashable {
        /// A new passkey was created and saved.
        case registered(Passkey)
        /// A passkey signed an assertion; its new counter was saved.
        case signedIn(Passkey)
    }

    /// What happened.
    public var outcome: Outcome
    /// The passkey store it was saved in.
    public var storePath: String

    /// The passkey that was created or used.
    public var passkey: Passkey {
        switch outcome {
        case .registered(let passkey), .signedIn(let passkey): return passkey
        }
    }
}
