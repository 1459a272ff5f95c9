import NIOCore

/// A set of contact IDs that keeps at most `capacity`, forgetting the one inserted longest ago.
struct RecentIDs {
    private var members: Set<[UInt8]> = []
    private var order: CircularBuffer<[UInt8]> = []
    let capacity: Int

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    var count: Int { members.count }

    func contains(_ id: [UInt8]) -> Bool { members.contains(id) }

    /// Adds `id` as the newest (moving it there if it was a member already).
    mutating func insert(_ id: [UInt8]) {
        if members.contains(id) {
            if let index = order.firstIndex(of: id) { order.remove(at: index) }
        } else {
            members.insert(id)
        }
        order.append(id)
        while order.count > capacity, let oldest = order.popFirst() { members.remove(oldest) }
    }

    mutating func remove(_ id: [UInt8]) {
        guard members.remove(id) != nil, let index = order.firstIndex(of: id) else { return }
        order.remove(at: index)
    }

    /// The members, oldest first.
    var ordered: [[UInt8]] { Array(order) }

    /// Whether `ids` are the newest members, in this order (the last of them the newest): inserting
    /// them again would change nothing.
    func endsWith(_ ids: [[UInt8]]) -> Bool {
        guard ids.count <= order.count else { return false }
        return zip(order.suffix(ids.count), ids).allSatisfy { $0 == $1 }
    }
}
