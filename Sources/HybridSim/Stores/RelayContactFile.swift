import CTAP2
import Foundation
import HybridRuntime

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The file behind `hybrid-sim relay --contacts FILE`: the relay's `RelayContactMemory` (the
/// contact IDs phones listened on and revoked), kept across restarts (Docs/STORES.md):
///
/// ```json
/// {"version": 1, "known": ["<unpadded base64url contact ID>", …], "revoked": […]}
/// ```
///
/// Each list is oldest first; every ID is 32 bytes (the SHA-256 of a phone's listen token). It is
/// written like the stores (atomically, mode 0600) and read as strictly: a damaged file is an error
/// naming it and the member, and is never modified. One relay process owns a file for its whole
/// life (``open(path:)`` holds `FILE.lock` while the value lives), so two relays cannot overwrite each other's memory.
public final class RelayContactFile: Sendable {
    /// The only format version this build reads and writes.
    public static let version = 1
    /// The size of every contact ID in the file.
    public static let contactIDSize = 32

    /// The file.
    public let path: String
    /// What it held when opened (empty when there was no file).
    public let memory: RelayContactMemory
    private let lock: Int32

    /// Reads the file (a missing one is an empty memory, created at the first save) and takes its
    /// lock for as long as this process runs.
    ///
    /// - Throws: ``StoreError``: `locked` when another process holds the file (another relay);
    ///   `unreadable` when its directory does not exist or the lock file cannot be opened (nothing
    ///   is created then), `notJSON`, `invalidDocument`, `unsupportedVersion` or `invalidEntry`
    ///   (naming the member) for a file that cannot be used; the file is left as it is.
    public static func open(path: String) throws(StoreError) -> RelayContactFile {
        let directory = (path as NSString).deletingLastPathComponent
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.isEmpty ? "." : directory, isDirectory: &isDirectory),
            isDirectory.boolValue
        else {
            throw StoreError(.unreadable, path: path, "the directory \(directory) does not exist (it is not created: a mistyped path would be)")
        }
        let lock = try StoreLock.hold(path: path)
        do {
            return RelayContactFile(path: path, memory: try load(path: path), lock: lock)
        } catch {
            close(lock)
            throw error
        }
    }

    private init(path: String, memory: RelayContactMemory, lock: Int32) {
        self.path = path
        self.memory = memory
        self.lock = lock
    }

    /// Gives the lock back (the end of the process does too).
    deinit { close(lock) }

    /// The persistence a relay configuration takes (`RelayConfiguration.contactPersistence`):
    /// starts from ``memory``, saves into this file, and reads it back to tell whether a memory with
    /// nothing new is still there (a file removed or replaced since is saved again).
    public var persistence: RelayContactPersistence {
        // The closure holds this value, so the file stays locked as long as a relay may save into it.
        RelayContactPersistence(initial: memory, current: { [path] in try? Self.load(path: path) }) { [self] memory in
            try Self.save(memory, to: self.path)
        }
    }

    /// The memory stored at `path` (empty when there is no file), without taking the lock.
    public static func load(path: String) throws(StoreError) -> RelayContactMemory {
        guard let bytes = try AtomicFile.read(path: path) else { return RelayContactMemory() }
        // As strictly as the stores: a member given twice (one list silently lost at the next
        // save) is not JSON, and the version is the integer 1, not 1.0.
        let (_, fields) = try StoreJSON.object(bytes, path: path)
        let version = try StoreJSON.version(fields, path: path)
        guard version == Self.version else {
            throw StoreError(.unsupportedVersion, path: path, "version \(version): this build reads version \(Self.version)")
        }
        // The strings of the optional array `key` (absent or null: none).
        func strings(_ key: String) throws(StoreError) -> [String] {
            let value: JSONReader.Value? = fields.first(where: { $0.name == key })?.value
            switch value {
            case nil, .null?:
                return []
            case .array(let elements)?:
                var texts: [String] = []
                for (index, element) in elements.enumerated() {
                    guard case .string(let text) = element else {
                        throw StoreError(.invalidEntry, path: path, "\(key)[\(index)]: wrong type: a string is required")
                    }
                    texts.append(text)
                }
                return texts
            case .some:
                throw StoreError(.invalidDocument, path: path, "\(key): wrong type: an array is required")
            }
        }
        func ids(_ key: String) throws(StoreError) -> [[UInt8]] {
            var out: [[UInt8]] = []
            for (index, text) in try strings(key).enumerated() {
                guard let id = Base64URL.decodeUnpadded(text) else {
                    throw StoreError(
                        .invalidEntry, path: path,
                        "\(key)[\(index)]: not unpadded base64url (\(Base64URL.problem(with: text) ?? "it is padded"))")
                }
                guard id.count == Self.contactIDSize else {
                    throw StoreError(
                        .invalidEntry, path: path, "\(key)[\(index)]: \(id.count) bytes, where a contact ID is \(Self.contactIDSize)")
                }
                out.append(id)
            }
            return out
        }
        return RelayContactMemory(known: try ids("known"), revoked: try ids("revoked"))
    }

    /// Writes `memory` to `path`: atomically, mode 0600 (the relay holding the file calls it). A
    /// directory that is gone (removed while the relay ran) is not made again: `writeFailed`, as
    /// ``open(path:)`` refuses one that does not exist.
    public static func save(_ memory: RelayContactMemory, to path: String) throws(StoreError) {
        // Written out by hand rather than through an encoder: the members in this order, one ID a
        // line (a diff of two saves reads), and base64url needs no escaping in a JSON string;
        // `RelayContactFileTests` reads every save back through the strict reader.
        func list(_ ids: [[UInt8]]) -> String {
            ids.isEmpty ? "[]" : "[\n    " + ids.map { "\"\(Base64URL.encode($0))\"" }.joined(separator: ",\n    ") + "\n  ]"
        }
        let text = "{\n  \"version\": \(Self.version),\n  \"known\": \(list(memory.known)),\n  \"revoked\": \(list(memory.revoked))\n}\n"
        try AtomicFile.write(Array(text.utf8), to: path, createsDirectory: false)
    }
}
