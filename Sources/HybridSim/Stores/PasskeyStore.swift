import CTAP2
import Crypto
import HybridCore

/// The phone's passkeys on disk: `{"version": 1, "passkeys": [Passkey, …]}` (`Docs/STORES.md`).
///
/// ```swift
/// var store = try PasskeyStore.load(path: PasskeyStore.defaultPath())
/// var authenticator = SoftwareAuthenticator(passkeys: store.passkeys)
/// … // answer a request
/// store.passkeys = authenticator.passkeys
/// try store.save()
/// ```
///
/// - ``load(path:)`` never writes. A missing file is an empty store (created by the first
///   ``save()``); anything unreadable or malformed, including a passkey the phone could not use (an
///   empty `credentialId` or `rpId`, a `privateKey` that is not a P-256 scalar), is a ``StoreError``
///   naming the file, the entry and the problem, and the file is left untouched.
/// - ``save()`` replaces the file atomically with mode 0600 (temporary file, fsync, rename, fsync of
///   the directory), so a crash mid-write leaves the old store or the new one, never a mix.
/// - Writers in several processes are serialized by an advisory lock (`update(_:)`, ``save()``):
///   the file is re-read under the lock and merged by credential ID, so a passkey another phone
///   saved meanwhile is kept and a counter never goes backwards. Unknown members are kept.
public struct PasskeyStore: Sendable {
    /// The file name in the store directory.
    public static let fileName = "passkeys.json"

    /// The store file.
    public let path: String
    /// The passkeys, in file order. Credential IDs must be unique.
    public var passkeys: [Passkey]

    /// An in-memory store for `path` (nothing is read or written).
    public init(path: String, passkeys: [Passkey] = []) {
        self.path = path
        self.passkeys = passkeys
    }

    /// `$HYBRID_SIM_HOME/passkeys.json`, or `~/.hybrid-sim/passkeys.json`.
    public static func defaultPath(environment: [String: String]? = nil) -> String {
        let directory = environment.map { StoreLocation.directory(environment: $0) } ?? StoreLocation.directory()
        return directory + "/" + fileName
    }

    /// Reads the store at `path`; a missing file gives an empty store.
    ///
    /// - Throws: ``StoreError`` (`unreadable`, `notJSON`, `invalidDocument`, `unsupportedVersion`,
    ///   `invalidEntry`); the file is not modified.
    public static func load(path: String) throws(StoreError) -> PasskeyStore {
        PasskeyStore(path: path, passkeys: try StoreDocument<Kind>.load(path: path) ?? [])
    }

    /// Writes the store atomically with mode 0600, creating its directory (mode 0700) if needed.
    ///
    /// Under the store lock the file is re-read and merged with ``passkeys`` by credential ID: a
    /// passkey only on disk (another process saved it) is kept, a passkey in both keeps these fields
    /// with the larger `signCount`. This value is not changed; ``load(path:)`` shows the result.
    ///
    /// - Throws: ``StoreError`` `invalidEntry` for duplicate credential IDs or a passkey that
    ///   ``load(path:)`` would refuse (nothing is written),
    ///   the load errors when the file on disk is damaged or newer (it is not overwritten), `locked`,
    ///   `directoryFailed`, `writeFailed` (the previous file is intact).
    public func save() throws(StoreError) {
        _ = try StoreDocument<Kind>.save(passkeys, path: path)
    }

    /// ``save()`` that stops as if the process died at `crash` (for tests).
    package func save(simulatingCrash crash: SimulatedCrash) throws(StoreError) {
        _ = try StoreDocument<Kind>.save(passkeys, path: path, simulatingCrash: crash)
    }

    /// One read-modify-write under the store lock: ``passkeys`` is replaced by the file's current
    /// content, `body` changes it and returns whether to write it back. The lock is held only while
    /// `body` runs, so `body` must not wait for anything (no network, no user).
    ///
    /// - Throws: what ``load(path:)`` and ``save()`` throw; on error ``passkeys`` is unchanged.
    ///
    /// - Parameters:
    ///   - wait: how long to wait for another writer's lock before `locked` is thrown.
    ///   - body: changes the passkeys and says whether to write them back.
    @discardableResult
    public mutating func update<T>(
        wait: Duration = .seconds(10), _ body: (inout [Passkey]) -> (result: T, write: Bool)
    ) throws(StoreError) -> T {
        var outcome: T?
        passkeys = try StoreDocument<Kind>.update(path: path, wait: wait) { entries throws(StoreError) -> Bool in
            let (result, write) = body(&entries)
            outcome = result
            return write
        }
        guard let outcome else { preconditionFailure("update's body always runs") }
        return outcome
    }

    /// The passkeys for a relying party.
    public func passkeys(rpId: String) -> [Passkey] {
        passkeys.filter { $0.rpID == rpId }
    }

    /// The passkey with this credential ID.
    public func passkey(credentialId: [UInt8]) -> Passkey? {
        passkeys.first { $0.credentialID == credentialId }
    }

    /// Replaces the passkey with the same credential ID, or appends it.
    public mutating func upsert(_ passkey: Passkey) {
        if let index = passkeys.firstIndex(where: { $0.credentialID == passkey.credentialID }) {
            passkeys[index] = passkey
        } else {
            passkeys.append(passkey)
        }
    }

    enum Kind: StoreKind {
        static let entriesKey = "passkeys"
        static let identifierName = "credentialId"
        static func identifier(of entry: Passkey) -> [UInt8] { entry.credentialID }
        static let knownMembers: Set<String> = [
            "credentialId", "rpId", "rpName", "userId", "userName", "userDisplayName", "privateKey", "signCount",
            "createdAt",
        ]
        static func merged(mine: Passkey, disk: Passkey) -> Passkey {
            var merged = mine
            merged.signCount = max(mine.signCount, disk.signCount)
            return merged
        }
        static let unsignedIntegerMembers: [String: UInt64] = [
            "signCount": UInt64(UInt32.max), "createdAt": UInt64.max,
        ]

        /// A passkey the phone could not use: no credential ID (or one longer than a relying party
        /// accepts), no relying party ID, or a private key that is not a P-256 scalar (0, or not
        /// below the curve order), checked by swift-crypto.
        static func problem(in entry: Passkey) -> (member: String, problem: String)? {
            let idLength = entry.credentialID.count, maximum = AttestedCredentialData.maximumCredentialIdLength
            guard (1...maximum).contains(idLength) else {
                return ("credentialId", "credential ID must be 1…\(maximum) bytes, found \(idLength)")
            }
            guard !entry.rpID.isEmpty else { return ("rpId", "relying party ID is empty") }
            guard (try? P256.Signing.PrivateKey(rawRepresentation: entry.privateKey)) != nil else {
                return ("privateKey", "not a P-256 private key")
            }
            return nil
        }
    }
}
