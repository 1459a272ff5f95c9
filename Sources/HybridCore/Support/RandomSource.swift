import Crypto
import Synchronization

/// Where the core gets randomness: QR secrets, ephemeral keys, advert nonces, credential IDs.
///
/// Everything random in a session comes from one injected source, so a whole run can be replayed
/// byte for byte with ``deterministic(seed:)``. Use ``system`` for anything real.
public struct RandomSource: Sendable {
    private let generate: @Sendable (Int) -> [UInt8]

    /// Wraps a byte generator, which must return exactly the number of bytes asked for (a draw of
    /// another length traps, naming both). A fixed generator for tests must still vary its bytes:
    /// keys are drawn until the bytes are a valid P-256 scalar, and all zeros never is (see
    /// ``keyAgreementKey()``); ``deterministic(seed:)`` is the reproducible choice.
    public init(_ generate: @escaping @Sendable (Int) -> [UInt8]) {
        self.generate = generate
    }

    /// The operating system's cryptographically secure generator. The bytes come from the kernel
    /// (`getentropy`, i.e. `getrandom` on Linux) 256 at a time into a pool that hands each byte out
    /// once, so a sign-in's draws (QR secret, ephemeral keys, nonces, challenge, WebSocket keys and
    /// masking keys) cost a system call every few sign-ins instead of one per 8 bytes.
    public static let system = RandomSource { count in EntropyPool.shared.bytes(count) }

    /// A reproducible stream: SHA-256(seed ‖ counter) blocks. For tests and vectors only.
    public static func deterministic(seed: [UInt8]) -> RandomSource {
        let counter = Mutex<UInt64>(0)
        return RandomSource { count in
            var out: [UInt8] = []
            while out.count < count {
                let block = counter.withLock { value -> UInt64 in
                    defer { value += 1 }
                    return value
                }
                var hasher = SHA256()
                hasher.update(data: seed)
                hasher.update(data: (0..<8).map { UInt8(truncatingIfNeeded: block >> (8 * $0)) })
                out += hasher.finalize()
            }
            return Array(out.prefix(count))
        }
    }

    /// `count` random bytes.
    public func bytes(_ count: Int) -> [UInt8] {
        let drawn = generate(count)
        precondition(drawn.count == count, "RandomSource: the generator returned \(drawn.count) bytes for a draw of \(count)")
        return drawn
    }

    /// Draws before ``keyAgreementKey()`` and ``signingKey()`` give up: 32 random bytes are not a
    /// valid P-256 scalar with probability about 2^-32, so more than a few failures in a row is a
    /// generator that repeats itself, and waiting would never end.
    static let maxKeyDraws = 16

    /// A P-256 key-agreement key from 32 random bytes (redrawn in the negligible case that they are
    /// not a valid scalar). Traps after 16 invalid draws in a row (a constant generator, such
    /// as one of zeros), rather than loop forever.
    public func keyAgreementKey() -> P256.KeyAgreement.PrivateKey {
        drawKey { try P256.KeyAgreement.PrivateKey(rawRepresentation: $0) }
    }

    /// A P-256 signing key, drawn the same way.
    public func signingKey() -> P256.Signing.PrivateKey {
        drawKey { try P256.Signing.PrivateKey(rawRepresentation: $0) }
    }

    private func drawKey<Key>(_ make: ([UInt8]) throws -> Key) -> Key {
        for _ in 0..<Self.maxKeyDraws {
            if let key = try? make(bytes(32)) { return key }
        }
        preconditionFailure(
            "RandomSource: \(Self.maxKeyDraws) draws of 32 bytes in a row were not a valid P-256 private key; "
                + "the generator repeats itself (all zeros?): use RandomSource.deterministic(seed:) for reproducible keys")
    }
}
