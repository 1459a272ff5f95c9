@testable import HybridSim
import Testing

/// The bounded memory behind the relying party's spent challenges and the listener's seen nonces.
@Suite("RecentMemory: the last N keys")
struct RecentMemoryTests {
    @Test("the oldest key is forgotten first; a key remembered again keeps its place and takes the new value")
    func order() {
        var memory = RecentMemory<Int, String>(capacity: 3)
        let firsts = [memory.remember(1, "a"), memory.remember(2, "b"), memory.remember(3, "c")]
        #expect(firsts == [true, true, true])
        let again = memory.remember(1, "A")
        #expect(!again, "already remembered")
        #expect(memory[1] == "A")
        let fourth = memory.remember(4, "d")
        #expect(fourth)
        #expect(memory[1] == nil, "1 was first: forgotten, even though it was updated")
        #expect(memory[2] == "b" && memory[3] == "c" && memory[4] == "d")
        let back = memory.remember(1, "again")
        #expect(back, "a forgotten key is new again")
    }

    @Test("across many evictions (the order is compacted now and then) exactly the last N stay")
    func manyEvictions() {
        var memory = RecentMemory<Int, Int>(capacity: 100)
        for key in 0..<1_050 { memory.remember(key, key * 2) }
        #expect((0..<950).allSatisfy { memory[$0] == nil })
        #expect((950..<1_050).allSatisfy { memory[$0] == $0 * 2 })
    }

    @Test("the listener's seen nonces: another tunnel with a seen nonce is a replay, the same tunnel the relay's resend (answered or not); kept for the last 4,096")
    func seenNonces() {
        let seen = SeenNonces()
        let tunnel: [UInt8] = [7], other: [UInt8] = [8]
        #expect(seen.see([1], tunnelID: tunnel) == .new)
        #expect(seen.see([1], tunnelID: tunnel) == .again(answered: false))
        #expect(seen.see([1], tunnelID: other) == .replayed)
        seen.answered([1])
        #expect(seen.see([1], tunnelID: tunnel) == .again(answered: true))
        for n in 0..<(SeenNonces.capacity - 1) { #expect(seen.see([2, UInt8(n & 0xFF), UInt8(n >> 8)], tunnelID: tunnel) == .new) }
        #expect(seen.see([1], tunnelID: other) == .replayed, "still among the last 4,096")
        #expect(seen.see([3], tunnelID: tunnel) == .new)
        #expect(seen.see([1], tunnelID: other) == .new, "the oldest, forgotten")
    }
}
