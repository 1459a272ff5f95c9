/// How a store's save combines this process's entries with what another process wrote since the
/// store was loaded (`Docs/STORES.md`, "Concurrent writers").
///
/// The save re-reads the file under ``StoreLock`` and merges by credential ID:
/// - an entry only on disk is kept (another process registered it: its private key is never lost),
///   unless this process removed that ID on purpose;
/// - an entry only in memory is added;
/// - an entry in both takes this process's fields, except the counter, which is the larger of the
///   two (a counter never goes backwards).
enum StoreMerge {
    /// Merges `mine` into `disk`; the result lists `mine` in order, then entries only on disk.
    static func merge<Kind: StoreKind>(
        _ kind: Kind.Type, mine: [Kind.Entry], disk: [Kind.Entry], removed: Set<[UInt8]>
    ) -> [Kind.Entry] {
        let onDisk = Dictionary(disk.map { (Kind.identifier(of: $0), $0) }, uniquingKeysWith: { first, _ in first })
        var result: [Kind.Entry] = []
        var taken = Set<[UInt8]>()
        for entry in mine {
            let id = Kind.identifier(of: entry)
            guard taken.insert(id).inserted else { continue }
            if let stored = onDisk[id] {
                result.append(Kind.merged(mine: entry, disk: stored))
            } else {
                result.append(entry)
            }
        }
        for entry in disk {
            let id = Kind.identifier(of: entry)
            guard !removed.contains(id), taken.insert(id).inserted else { continue }
            result.append(entry)
        }
        return result
    }
}
