/// The last `capacity` keys remembered, each with a value; the oldest is forgotten first, in
/// amortized constant time. Remembering a key again updates its value and keeps its place.
///
/// What the relying party remembers of its spent challenges (used or expired) and what a
/// listening phone remembers of the client nonces it answered.
struct RecentMemory<Key: Hashable, Value> {
    /// How many keys are kept.
    let capacity: Int
    private var values: [Key: Value] = [:]
    /// Keys in the order they were first remembered, from `start` (the ones before are forgotten).
    private var order: [Key] = []
    private var start = 0

    init(capacity: Int) {
        precondition(capacity > 0, "a memory of nothing")
        self.capacity = capacity
    }

    /// The value remembered for `key`, if it is among the last `capacity`.
    subscript(key: Key) -> Value? { values[key] }

    /// Remembers `key` with `value`; `false` when it was already remembered (its value is updated).
    @discardableResult
    mutating func remember(_ key: Key, _ value: Value) -> Bool {
        guard values.updateValue(value, forKey: key) == nil else { return false }
        order.append(key)
        if order.count - start > capacity {
            values[order[start]] = nil
            start += 1
            if start >= capacity {
                order.removeFirst(start)
                start = 0
            }
        }
        return true
    }
}
