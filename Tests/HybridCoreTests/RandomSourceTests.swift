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

    /// The system source hands out a pool of 256-byte kernel blocks: draws that cross block
    /// boundaries are filled everywhere (a block not refetched would show as zeros, since a byte
    /// handed out is cleared in the pool, or as a repeat of the previous block).
    @Test func systemFillsAcrossBlocks() {
        var bytes: [UInt8] = []
        while bytes.count < 8 * 256 { bytes += RandomSource.system.bytes(7) }
        for position in stride(from: 0, to: bytes.count - 16, by: 16) {
            #expect(bytes[position..<position + 16].contains { $0 != 0 }, "16 zero bytes at \(position)")
        }
        let blocks = stride(from: 0, to: 7 * 256, by: 256).map { Array(bytes[$0..<$0 + 256]) }
        #expect(Set(blocks).count == blocks.count, "a 256-byte stretch repeats")
        let large = RandomSource.system.bytes(3 * 256 + 5)
        #expect(Array(large.suffix(5)) != [0, 0, 0, 0, 0], "the last, partial block is used too")
        #expect(Array(large[256..<512]) != Array(large[0..<256]))
    }

    @Test func systemVaries() {
        #expect(RandomSource.system.bytes(32) != RandomSource.system.bytes(32))
    }

    @Test("a RandomSource whose generator repeats itself (all zeros) or returns short draws traps saying so, instead of drawing keys forever or failing later")
    func faultyGeneratorTraps() async {
        let zeros = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = RandomSource { Array(repeating: 0, count: $0) }.keyAgreementKey()
        }
        let zerosSaid = String(decoding: zeros?.standardErrorContent ?? [], as: UTF8.self)
        #expect(zerosSaid.contains("16 draws of 32 bytes in a row were not a valid P-256 private key"), "\(zerosSaid)")
        let short = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = RandomSource { _ in [1, 2, 3] }.bytes(16)
        }
        let shortSaid = String(decoding: short?.standardErrorContent ?? [], as: UTF8.self)
        #expect(shortSaid.contains("the generator returned 3 bytes for a draw of 16"), "\(shortSaid)")
    }
}
