/// A deterministic, seedable random number generator for tests (SplitMix64, Steele, Lea and Flood,
/// "Fast splittable pseudorandom number generators", 2014). Not cryptographic: use it only to make
/// randomized tests reproducible.
///
/// ```swift
/// var rng = SeededGenerator(seed: 42)
/// let byte = UInt8.random(in: .min ... .max, using: &rng)
/// ```
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Starts the sequence for `seed`; equal seeds give equal sequences on every platform.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` random bytes.
    public mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<max(0, count)).map { _ in UInt8(truncatingIfNeeded: next()) }
    }
}
