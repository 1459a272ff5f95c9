@testable import HybridRuntime
import Testing

/// The relay's bounded memory of contact IDs: the oldest is forgotten, not the newest refused.
@Suite struct RecentIDsTests {
    @Test("past its capacity the oldest ID goes; inserting again makes an ID the newest; remove forgets it")
    func forgetsTheOldest() {
        var ids = RecentIDs(capacity: 3)
        for id in [[1], [2], [3]] as [[UInt8]] { ids.insert(id) }
        ids.insert([1])  // [1] is now the newest
        ids.insert([4])  // so [2] goes
        #expect(!ids.contains([2]) && ids.contains([1]) && ids.contains([3]) && ids.contains([4]))
        #expect(ids.count == 3)
        ids.remove([3])
        ids.insert([5])
        ids.insert([6])  // [1] is the oldest now
        #expect(!ids.contains([1]) && ids.contains([4]) && ids.contains([5]) && ids.contains([6]))
        #expect(ids.count == 3)
        // A flood of made-up IDs cannot keep a real one out: the latest insert is always kept.
        for n in 0..<10 { ids.insert([100, UInt8(n)]) }
        ids.insert([7])
        #expect(ids.contains([7]) && ids.count == 3)
    }

    @Test("endsWith: the newest members in order; not a prefix, not another order, not more than the members")
    func endsWith() {
        var ids = RecentIDs(capacity: 4)
        for id in [[1], [2], [3]] as [[UInt8]] { ids.insert(id) }
        #expect(ids.endsWith([]) && ids.endsWith([[3]]) && ids.endsWith([[2], [3]]) && ids.endsWith([[1], [2], [3]]))
        #expect(!ids.endsWith([[2]]) && !ids.endsWith([[3], [2]]) && !ids.endsWith([[0], [1], [2], [3]]))
        ids.insert([2])
        #expect(ids.endsWith([[1], [3], [2]]))
    }
}
