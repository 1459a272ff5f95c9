import CTAP2

/// What one fuzz input did to a parser.
package enum FuzzOutcome: Sendable, Equatable {
    /// The parser accepted the input and every invariant held.
    case accepted
    /// The parser refused the input with its own typed error.
    case rejected
    /// The parser accepted the input but an invariant failed (a bug): what went wrong.
    case violation(String)
}

/// One parser under fuzzing: a name for `Scripts/fuzz`, the function libFuzzer (or a replay) calls
/// with each input, and valid inputs to seed its corpus.
///
/// `run` must never trap on its own: a refused input is ``FuzzOutcome/rejected`` and a broken
/// invariant ``FuzzOutcome/violation(_:)``, so the Swift tests can replay corpora in-process.
/// `hybrid-fuzz` turns a violation into a trap, which libFuzzer records as a crash.
package struct FuzzTarget: Sendable {
    /// The name used on the command line and as the corpus directory (`Tests/Fuzz/Corpus/<name>`).
    package let name: String
    /// What is fuzzed and which invariant is checked, for `hybrid-fuzz list` and the docs.
    package let summary: String
    /// Feeds one input to the parser.
    package let run: @Sendable ([UInt8]) -> FuzzOutcome
    /// Inputs to start from, at least one accepted (some refused on purpose, e.g. a relay request
    /// for an unknown tunnel); `hybrid-fuzz seeds` writes them as the committed seed corpus.
    package let seeds: @Sendable () -> [[UInt8]]

    package init(
        _ name: String, _ summary: String, seeds: @escaping @Sendable () -> [[UInt8]],
        run: @escaping @Sendable ([UInt8]) -> FuzzOutcome
    ) {
        self.name = name
        self.summary = summary
        self.seeds = seeds
        self.run = run
    }

    /// `.accepted` when `holds`, otherwise a violation described by `message` and the input.
    static func check(_ holds: Bool, _ message: @autoclosure () -> String) -> FuzzOutcome {
        holds ? .accepted : .violation(message())
    }
}

/// Every fuzz target, one per parser (`Docs/ROBUSTNESS.md`).
package enum FuzzTargets {
    /// All targets, in the order `Scripts/fuzz all` runs them.
    package static let all: [FuzzTarget] =
        QRTargets.all + CTAP2Targets.all + HandshakeTargets.all + TransportTargets.all + RuntimeTargets.all
        + StoreTargets.all + WebAuthnJSONTargets.all + LinkingTargets.all + LinkStoreTargets.all + InspectTargets.all
        + RelyingPartyTargets.all + RelyingPartyServerTargets.all

    /// The target called `name`, if any.
    package static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

extension Array where Element == UInt8 {
    /// Lower-case hex, for violation messages.
    var fuzzHex: String { Hex.encode(self) }
}
