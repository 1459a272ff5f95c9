import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// `RandomSource`: the deterministic stream is SHA-256(seed ‖ uint64_le(counter)) blocks and
/// replays exactly; the system source gives the requested sizes.
@Suite struct RandomSourceTests {
    static func block(_ seed: [UInt8], _ counter: UInt64) -> [UInt8] {
        Array(SHA256.hash(data: seed + (0..<8).map { UInt8(truncatingIfNeeded: counter >> (8 * $0)) }))
    }

    @Test func deterministicStreamLayout() {
        let seed = Array("seed".utf8)
        let random = RandomSource.deterministic(seed: seed)
        #expect(random.bytes(32) == Self.block(seed, 0))
        #expect(random.bytes(40) == Self.block(seed, 1) + Self.block(seed, 2).prefix(8))
        // A call takes whole blocks: the rest of block 2 is not used again.
        #expect(random.bytes(1) == Array(Self.block(seed, 3).prefix(1)))
        #expect(random.bytes(0) == [])
    }

    @Test func sameSeedReplays() {
        let a = RandomSource.deterministic(seed: [1, 2, 3])
        let b = RandomSource.deterministic(seed: [1, 2, 3])
        let c = RandomSource.deterministic(seed: [1, 2, 4])
        let first = (0..<5).map { a.bytes(17 * $0) }
        #expect((0..<5).map { b.bytes(17 * $0) } == first)
        #expect((0..<5).map { c.bytes(17 * $0) } != first)
        let keyA = RandomSource.deterministic(seed: [9]).keyAgreementKey()
        let keyB = RandomSource.deterministic(seed: [9]).keyAgreementKey()
        #expect(keyA.rawRepresentation == keyB.rawRepresentation)
        let signingA = RandomSource.deterministic(seed: [9]).signingKey()
        #expect(signingA.rawRepresentation == keyA.rawRepresentation)
    }

    /// The deterministic key is the first block used as the scalar.
    @Test func keyFromFirstBlock() throws {
        let key = RandomSource.deterministic(seed: [7]).keyAgreementKey()
        #expect(Array(key.rawRepresentation) == Self.block([7], 0))
    }

    @Test(arguments: [0, 1, 16, 32, 33, 100])
    func systemSizes(_ count: Int) {
        #expect(RandomSource.system.bytes(count).count == count)
    }

    /// The system source takes 8 bytes per draw: every byte of a draw must be used, not only the
    /// first (a byte position that is always 0 would show here).
    @Test func systemFillsEveryPosition() {
        let bytes = RandomSource.system.bytes(8 * 256 + 5)
        for position in 0..<8 {
            let column = stride(from: position, to: bytes.count, by: 8).map { bytes[$0] }
            #expect(Set(column).count > 64, "position \(position) of the 8-byte draws: \(Set(column).count) distinct values")
        }
        #expect(Array(bytes.suffix(5)) != [0, 0, 0, 0, 0], "the last, partial draw is used too")
    }

    @Test func systemVaries() {
        #expect(RandomSource.system.bytes(32) != RandomSource.system.bytes(32))
    }
}
