import Crypto
import Synchronization

/// Where the core gets randomness: QR secrets, ephemeral keys, advert nonces, credential IDs.
///
/// Everything random in a session comes from one injected source, so a whole run can be replayed
/// byte for byte with ``deterministic(seed:)``. Use ``system`` for anything real.
public struct RandomSource: Sendable {
    private let generate: @Sendable (Int) -> [UInt8]

    /// Wraps a byte generator.
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
    public func bytes(_ count: Int) -> [UInt8] { generate(count) }

    /// A P-256 key-agreement key from 32 random bytes (redrawn in the negligible case that they are
    /// not a valid scalar).
    public func keyAgreementKey() -> P256.KeyAgreement.PrivateKey {
        while true {
            if let key = try? P256.KeyAgreement.PrivateKey(rawRepresentation: bytes(32)) { return key }
        }
    }

    /// A P-256 signing key, drawn the same way.
    public func signingKey() -> P256.Signing.PrivateKey {
        while true {
            if let key = try? P256.Signing.PrivateKey(rawRepresentation: bytes(32)) { return key }
        }
    }
}
