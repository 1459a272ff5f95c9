import HybridCore

/// The desktop relying party's registered credentials on disk:
/// `{"version": 1, "credentials": [RegisteredCredential, …]}` (`Docs/STORES.md`).
///
/// Same guarantees as ``PasskeyStore``: loading never writes and reports a damaged file as a
/// ``StoreError`` naming it; saving is atomic with mode 0600, and merges under the store lock with
/// what another desktop saved meanwhile (a counter never goes backwards; a credential removed with
/// ``remove(id:)`` stays removed).
public struct RelyingPartyStore: Sendable {
    /// The file name in the store directory.
    public static let fileName = "rp-credentials.json"

    /// The store file.
    public let path: String
    /// The credentials, in file order. Credential IDs must be unique.
    public var credentials: [RegisteredCredential]
    /// Credential IDs removed with ``remove(id:)``: the merge at save time does not bring them back.
    private var removedIDs: Set<[UInt8]> = []

    /// An in-memory store for `path` (nothing is read or written).
    public init(path: String, credentials: [RegisteredCredential] = []) {
        self.path = path
        self.credentials = credentials
    }

    /// `$HYBRID_SIM_HOME/rp-credentials.json`, or `~/.hybrid-sim/rp-credentials.json`.
    public static func defaultPath(environment: [String: String]? = nil) -> String {
        let directory = environment.map { StoreLocation.directory(environment: $0) } ?? StoreLocation.directory()
        return directory + "/" + fileName
    }

    /// Reads the store at `path`; a missing file gives an empty store.
    ///
    /// - Throws: ``StoreError`` (`unreadable`, `notJSON`, `invalidDocument`, `unsupportedVersion`,
    ///   `invalidEntry`, which includes a public key that is not an ES256 COSE_Key); the file is not
    ///   modified.
    public static func load(path: String) throws(StoreError) -> RelyingPartyStore {
        RelyingPartyStore(path: path, credentials: try StoreDocument<Kind>.load(path: path) ?? [])
    }

    /// Writes the store atomically with mode 0600, creating its directory (mode 0700) if needed.
    ///
    /// - Throws: ``StoreError`` `invalidEntry` for duplicate credential IDs (nothing is written),
    ///   `directoryFailed`, `writeFailed` (the previous file is intact).
    ///
    /// Under the store lock the file is re-read and merged by credential ID (``PasskeyStore/save()``):
    /// credentials only on disk are kept unless removed here, and `signCount` is the larger of the two.
    public func save() throws(StoreError) {
        _ = try StoreDocument<Kind>.save(credentials, removed: removedIDs, path: path)
    }

    /// ``save()`` that stops as if the process died at `crash` (for tests).
    package func save(simulatingCrash crash: SimulatedCrash) throws(StoreError) {
        _ = try StoreDocument<Kind>.save(credentials, removed: removedIDs, path: path, simulatingCrash: crash)
    }

    /// The credential with this ID.
    public func credential(id: [UInt8]) -> RegisteredCredential? {
        credentials.first { $0.credentialId == id }
    }

    /// The credentials registered for a relying party.
    public func credentials(rpId: String) -> [RegisteredCredential] {
        credentials.filter { $0.rpId == rpId }
    }

    /// The credentials a relying party registered for one user handle.
    public func credentials(rpId: String, userId: [UInt8]) -> [RegisteredCredential] {
        credentials.filter { $0.rpId == rpId && $0.userId == userId }
    }

    /// The credentials a relying party registered for one account name.
    public func credentials(rpId: String, userName: String) -> [RegisteredCredential] {
        credentials.filter { $0.rpId == rpId && $0.userName == userName }
    }

    /// Replaces the credential with the same ID (after an authentication updated its counter),
    /// or appends it (after a registration).
    public mutating func upsert(_ credential: RegisteredCredential) {
        removedIDs.remove(credential.credentialId)
        if let index = credentials.firstIndex(where: { $0.credentialId == credential.credentialId }) {
            credentials[index] = credential
        } else {
            credentials.append(credential)
        }
    }

    /// Removes and returns the credential with this ID.
    @discardableResult
    public mutating func remove(id: [UInt8]) -> RegisteredCredential? {
        guard let index = credentials.firstIndex(where: { $0.credentialId == id }) else { return nil }
        removedIDs.insert(id)
        return credentials.remove(at: index)
    }

    enum Kind: StoreKind {
        static let entriesKey = "credentials"
        static let identifierName = "credentialId"
        static func identifier(of entry: RegisteredCredential) -> [UInt8] { entry.credentialId }
        static let knownMembers: Set<String> = [
            "credentialId", "publicKey", "signCount", "userId", "userName", "rpId", "createdAt", "attestationFormat",
            "backupEligible", "backupState",
        ]
        static let unsignedIntegerMembers: [String: UInt64] = [
            "signCount": UInt64(UInt32.max), "createdAt": UInt64.max,
        ]
        static func merged(mine: RegisteredCredential, disk: RegisteredCredential) -> RegisteredCredential {
            var merged = mine
            merged.signCount = max(mine.signCount, disk.signCount)
            return merged
        }
    }
}
