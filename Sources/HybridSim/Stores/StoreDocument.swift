import CTAP2
import Foundation

/// What distinguishes one store file format from another.
protocol StoreKind {
    /// One entry.
    associatedtype Entry: Codable
    /// The member holding the entries array (`"passkeys"`, `"credentials"`).
    static var entriesKey: String { get }
    /// The ID that must be unique among entries.
    static func identifier(of entry: Entry) -> [UInt8]
    /// How the unique ID is named in messages (`credentialId`).
    static var identifierName: String { get }
    /// The members this build writes in an entry; any other member is kept as it was on rewrite.
    static var knownMembers: Set<String> { get }
    /// One entry present both in memory and on disk (see ``StoreMerge``).
    static func merged(mine: Entry, disk: Entry) -> Entry
    /// What is wrong with a decoded entry that its JSON shape cannot show (an empty ID, a key that
    /// cannot be used), as the member and the problem, or `nil` when the entry is usable.
    static func problem(in entry: Entry) -> (member: String, problem: String)?
    /// The unsigned integer members and their largest values (`["signCount": 4294967295]`), so that a
    /// number out of range, which the decoder reports without a location, is named.
    static var unsignedIntegerMembers: [String: UInt64] { get }
    /// Whether `entry` is the record `disk` was, not another record under its ID (a phone linked
    /// again under its name), so that it keeps the unknown members `disk` had in the file.
    static func isSameRecord(_ entry: Entry, as disk: Entry) -> Bool
}

extension StoreKind {
    /// No checks beyond decoding.
    static func problem(in entry: Entry) -> (member: String, problem: String)? { nil }
    /// None named.
    static var unsignedIntegerMembers: [String: UInt64] { [:] }
    /// The ID names the record: an entry with the ID is the same record.
    static func isSameRecord(_ entry: Entry, as disk: Entry) -> Bool { true }
}

/// Reading and writing store files `{"version": 1, "<entriesKey>": [entry, …]}` (`Docs/STORES.md`).
///
/// Loading only reads; every problem becomes a ``StoreError`` naming the file, and the file is left
/// exactly as it was. Unknown members (top level or inside an entry) are ignored when read and kept
/// when the file is rewritten, so a newer build's additions survive an older build's save.
enum StoreDocument<Kind: StoreKind> {
    /// A store file as read: the decoded entries plus the raw JSON objects they came from.
    struct Snapshot {
        var entries: [Kind.Entry]
        /// The top-level object (with its unknown members).
        var members: [String: Any]
        /// Each entry as decoded and its raw object, by its ID.
        var rawEntries: [[UInt8]: (entry: Kind.Entry, object: [String: Any])]
    }

    /// The only format version this build reads and writes.
    static var version: Int { 1 }

    /// The entries stored at `path`, or `nil` when there is no file.
    ///
    /// Syntax and the version are checked by ``StoreJSON`` (strictly: a repeated member is refused),
    /// the entries with `JSONDecoder`. When the decoder reports a problem without a location (as it does
    /// for a number out of range), each entry is decoded on its own to name the broken one.
    static func load(path: String) throws(StoreError) -> [Kind.Entry]? {
        try read(path: path)?.entries
    }

    /// The whole document at `path`, or `nil` when there is no file.
    static func read(path: String) throws(StoreError) -> Snapshot? {
        guard let bytes = try AtomicFile.read(path: path) else { return nil }
        let data = Data(bytes)
        let (members, fields) = try StoreJSON.object(bytes, path: path)
        let found = try StoreJSON.version(fields, path: path)
        guard found == version else {
            throw StoreError(.unsupportedVersion, path: path, "version \(found); this build reads version \(version)")
        }
        guard let entriesValue = members[Kind.entriesKey] else {
            throw StoreError(.invalidDocument, path: path, "no \"\(Kind.entriesKey)\" array")
        }
        guard let elements = entriesValue as? [Any] else {
            throw StoreError(.invalidDocument, path: path, "\"\(Kind.entriesKey)\" is not an array")
        }

        let entries: [Kind.Entry]
        do {
            entries = try JSONDecoder().decode(Envelope.self, from: data).entries
        } catch let error as DecodingError {
            throw locate(error, elements: elements, path: path)
        } catch {
            throw StoreError(.invalidEntry, path: path, "\(error)")
        }
        try checkEntries(entries, path: path)
        var rawEntries: [[UInt8]: (entry: Kind.Entry, object: [String: Any])] = [:]
        for (entry, element) in zip(entries, elements) {
            if let object = element as? [String: Any] { rawEntries[Kind.identifier(of: entry)] = (entry, object) }
        }
        return Snapshot(entries: entries, members: members, rawEntries: rawEntries)
    }

    /// Saves `entries` merged with what is on disk now (``StoreMerge``), under the store lock.
    static func save(
        _ entries: [Kind.Entry], removed: Set<[UInt8]> = [], path: String, simulatingCrash crash: SimulatedCrash? = nil
    ) throws(StoreError) -> [Kind.Entry] {
        try checkEntries(entries, path: path)
        return try update(path: path, simulatingCrash: crash) { disk throws(StoreError) in
            disk = StoreMerge.merge(Kind.self, mine: entries, disk: disk, removed: removed)
            return true
        }
    }

    /// Under the store lock: reads the file, lets `body` change the entries, and writes them back
    /// (atomically, mode 0600) when `body` returns `true`. Returns the entries as they now are.
    ///
    /// A file that does not load is never overwritten: its ``StoreError`` is thrown.
    static func update(
        path: String, wait: Duration = StoreLock.defaultWait, simulatingCrash crash: SimulatedCrash? = nil,
        _ body: (inout [Kind.Entry]) throws(StoreError) -> Bool
    ) throws(StoreError) -> [Kind.Entry] {
        try StoreLock.withLock(path: path, wait: wait) { () throws(StoreError) -> [Kind.Entry] in
            let snapshot = try read(path: path) ?? Snapshot(entries: [], members: [:], rawEntries: [:])
            var entries = snapshot.entries
            guard try body(&entries) else { return entries }
            try checkEntries(entries, path: path)
            try write(entries, over: snapshot, path: path, simulatingCrash: crash)
            return entries
        }
    }

    /// Encodes `entries`, keeping the unknown members of `snapshot`, and replaces the file.
    private static func write(
        _ entries: [Kind.Entry], over snapshot: Snapshot, path: String, simulatingCrash crash: SimulatedCrash?
    ) throws(StoreError) {
        var members = snapshot.members
        members["version"] = version
        var objects: [Any] = []
        do {
            for entry in entries {
                let known = try JSONSerialization.jsonObject(with: JSONEncoder().encode(entry)) as? [String: Any] ?? [:]
                // Unknown members stay with their record, not with another record under its ID.
                let raw = snapshot.rawEntries[Kind.identifier(of: entry)]
                var object = raw.flatMap { Kind.isSameRecord(entry, as: $0.entry) ? $0.object : nil } ?? [:]
                for member in Kind.knownMembers { object[member] = nil }
                object.merge(known) { _, new in new }
                objects.append(object)
            }
        } catch {
            throw StoreError(.writeFailed, path: path, "cannot encode the store: \(error)")
        }
        members[Kind.entriesKey] = objects
        let bytes: [UInt8]
        do {
            bytes = try StoreJSON.bytes(members)
        } catch {
            throw StoreError(.writeFailed, path: path, "cannot encode the store: \(error)")
        }
        try AtomicFile.write(bytes, to: path, simulatingCrash: crash)
    }

    /// Each entry passes ``StoreKind/problem(in:)`` and no two share an ID, so what is saved loads again.
    private static func checkEntries(_ entries: [Kind.Entry], path: String) throws(StoreError) {
        var seen: [[UInt8]: Int] = [:]
        for (index, entry) in entries.enumerated() {
            if let found = Kind.problem(in: entry) {
                throw StoreError(
                    .invalidEntry, path: path, "\(Kind.entriesKey)[\(index)].\(found.member): \(found.problem)")
            }
            let id = Kind.identifier(of: entry)
            if let first = seen[id] {
                throw StoreError(
                    .invalidEntry, path: path,
                    "\(Kind.entriesKey)[\(index)]: duplicate \(Kind.identifierName) (same as \(Kind.entriesKey)[\(first)])"
                )
            }
            seen[id] = index
        }
    }

    /// The entry a decoding failure is about, as an ``StoreError/Code/invalidEntry``.
    private static func locate(_ error: DecodingError, elements: [Any], path: String) -> StoreError {
        if let located = entryError(error, prefix: [], path: path) { return located }
        // No location from the decoder: decode the entries one by one to find the broken one.
        for (index, element) in elements.enumerated() {
            let name = "\(Kind.entriesKey)[\(index)]"
            guard JSONSerialization.isValidJSONObject(element),
                let data = try? JSONSerialization.data(withJSONObject: element)
            else {
                return StoreError(.invalidEntry, path: path, "\(name): not a JSON object")
            }
            do {
                _ = try JSONDecoder().decode(Kind.Entry.self, from: data)
            } catch let error as DecodingError {
                // A number out of range comes without a location inside the entry: name the member.
                if entryError(error, prefix: [], path: path) == nil, let object = element as? [String: Any],
                    let found = outOfRange(object)
                {
                    return StoreError(
                        .invalidEntry, path: path,
                        "\(name).\(found.member): \(found.member) must be a whole number from 0 to \(found.maximum)")
                }
                return entryError(error, prefix: [name], path: path)
                    ?? StoreError(.invalidEntry, path: path, "\(name): a value is malformed or out of range")
            } catch {
                return StoreError(.invalidEntry, path: path, "\(name): \(error)")
            }
        }
        return StoreError(.invalidEntry, path: path, "a value is malformed or out of range")
    }

    /// The first of ``StoreKind/unsignedIntegerMembers`` (by name) in `object` whose number is not an
    /// integer from 0 to its maximum, with that maximum.
    private static func outOfRange(_ object: [String: Any]) -> (member: String, maximum: UInt64)? {
        for (member, maximum) in Kind.unsignedIntegerMembers.sorted(by: { $0.key < $1.key }) {
            guard let number = object[member] as? NSNumber else { continue }  // absent or another type: located
            let value = UInt64(number.stringValue) ?? UInt64(exactly: number.doubleValue)
            if value.map({ $0 > maximum }) ?? true { return (member, maximum) }
        }
        return nil
    }

    /// `passkeys[2].privateKey: private key must be 32 bytes`, or `nil` when the error has no location.
    private static func entryError(_ error: DecodingError, prefix: [String], path: String) -> StoreError? {
        let keys: [any CodingKey]
        let problem: String
        switch error {
        case .keyNotFound(let key, let context):
            keys = context.codingPath + [key]
            problem = "missing"
        case .valueNotFound(let type, let context):
            keys = context.codingPath
            problem = "null, where \(DecodingWords.kind(type)) is required"
        case .typeMismatch(let type, let context):
            keys = context.codingPath
            problem = "wrong type: \(DecodingWords.kind(type)) is required"
        case .dataCorrupted(let context):
            keys = context.codingPath
            problem = context.debugDescription
        @unknown default:
            return nil
        }
        let location = (prefix + [DecodingWords.path(keys)]).filter { !$0.isEmpty }.joined(separator: ".")
        guard !location.isEmpty else { return nil }
        return StoreError(.invalidEntry, path: path, "\(location): \(problem)")
    }

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    private struct Envelope: Decodable {
        let entries: [Kind.Entry]

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            entries = try container.decode([Kind.Entry].self, forKey: Key(Kind.entriesKey))
        }
    }
}
