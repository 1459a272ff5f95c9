/// Produces deterministic malformed inputs for parser robustness tests: mutations of valid seed
/// inputs (bit flips, byte changes, truncation, insertion, deletion, duplication, splicing of two
/// seeds, "interesting" boundary bytes) and, now and then, purely random bytes.
///
/// ```swift
/// var mutator = Mutator(seed: 1, corpus: [validMessage, otherValidMessage])
/// for _ in 0..<20_000 {
///     let input = mutator.next()
///     _ = try? Parser(bytes: input)   // must throw or succeed, never trap or hang
/// }
/// ```
public struct Mutator: Sendable {
    /// One way of changing an input.
    public enum Mutation: CaseIterable, Sendable {
        /// Flip one random bit.
        case flipBit
        /// Replace one byte with a random byte.
        case setByte
        /// Replace one byte with a boundary value (0x00, 0x17–0x1B, 0x1F, 0x7F, 0x80, 0xFF, …).
        case setInterestingByte
        /// Cut the input at a random length.
        case truncate
        /// Insert 1–8 random bytes at a random position.
        case insert
        /// Delete a random run of up to 8 bytes.
        case delete
        /// Repeat a random slice of the input in place.
        case duplicate
        /// Join a prefix of the input with a suffix of another corpus entry.
        case splice
    }

    /// The seed inputs mutations start from.
    public let corpus: [[UInt8]]
    /// The random source; its state advances with every call.
    public var generator: SeededGenerator
    /// Longest purely random input ``next()`` produces.
    public var maxRandomLength: Int

    private static let interesting: [UInt8] = [
        0x00, 0x01, 0x17, 0x18, 0x19, 0x1A, 0x1B, 0x1F, 0x20, 0x40, 0x5F, 0x60, 0x7F, 0x80, 0x9F, 0xA0,
        0xBF, 0xC0, 0xF4, 0xF5, 0xF6, 0xF7, 0xF9, 0xFF,
    ]

    /// Creates a mutator over `corpus` (may be empty: then only random inputs are produced).
    public init(seed: UInt64, corpus: [[UInt8]], maxRandomLength: Int = 64) {
        self.corpus = corpus
        self.generator = SeededGenerator(seed: seed)
        self.maxRandomLength = maxRandomLength
    }

    /// The next test input: one in sixteen is random bytes, the rest are a corpus entry with one to
    /// four random mutations applied.
    public mutating func next() -> [UInt8] {
        if corpus.isEmpty || random(16) == 0 {
            return generator.bytes(random(maxRandomLength + 1))
        }
        var input = corpus[random(corpus.count)]
        for _ in 0...random(4) {
            input = mutate(input)
        }
        return input
    }

    /// `input` with one randomly chosen mutation applied.
    public mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        let kind = Mutation.allCases[random(Mutation.allCases.count)]
        return mutate(input, with: kind)
    }

    /// `input` with the given mutation applied at a random place.
    public mutating func mutate(_ input: [UInt8], with mutation: Mutation) -> [UInt8] {
        var bytes = input
        switch mutation {
        case .flipBit:
            guard !bytes.isEmpty else { return generator.bytes(1) }
            bytes[random(bytes.count)] ^= UInt8(1) << UInt8(random(8))
        case .setByte:
            guard !bytes.isEmpty else { return generator.bytes(1) }
            bytes[random(bytes.count)] = UInt8(truncatingIfNeeded: generator.next())
        case .setInterestingByte:
            guard !bytes.isEmpty else { return [Self.interesting[random(Self.interesting.count)]] }
            bytes[random(bytes.count)] = Self.interesting[random(Self.interesting.count)]
        case .truncate:
            bytes = Array(bytes.prefix(random(bytes.count + 1)))
        case .insert:
            bytes.insert(contentsOf: generator.bytes(1 + random(8)), at: random(bytes.count + 1))
        case .delete:
            guard !bytes.isEmpty else { return bytes }
            let start = random(bytes.count)
            let length = 1 + random(min(8, bytes.count - start))
            bytes.removeSubrange(start..<start + length)
        case .duplicate:
            guard !bytes.isEmpty else { return bytes }
            let start = random(bytes.count)
            let length = 1 + random(min(16, bytes.count - start))
            bytes.insert(contentsOf: bytes[start..<start + length], at: start)
        case .splice:
            guard !corpus.isEmpty else { return bytes }
            let other = corpus[random(corpus.count)]
            bytes = Array(bytes.prefix(random(bytes.count + 1))) + Array(other.suffix(random(other.count + 1)))
        }
        return bytes
    }

    /// A uniformly random integer in `0..<upperBound` (0 when `upperBound` is 0).
    public mutating func random(_ upperBound: Int) -> Int {
        guard upperBound > 0 else { return 0 }
        return Int(generator.next() % UInt64(upperBound))
    }
}
