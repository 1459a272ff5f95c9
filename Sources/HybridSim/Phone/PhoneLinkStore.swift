import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridRuntime

/// The phone's linking state on disk, `phone-link.json` next to the passkey store (Docs/STORES.md,
/// Docs/LINKING.md): its root secret and identity key (created once), its current listen token (its
/// SHA-256 is the contact ID, our stand-in for an FCM registration token), the pairing IDs it handed
/// out for that contact ID, and the listen tokens of the contact IDs it revoked with `--unlink`.
///
/// ```json
/// {"version": 2, "rootSecret": "…", "identityKey": "…", "listenToken": "…", "name": "HybridSim phone",
///  "pairingIds": ["…"], "revokedListenTokens": ["…"]}
/// ```
/// Byte strings are unpadded base64url. Written like the other stores: atomically, mode 0600.
///
/// Version 1 kept the contact ID itself, which every linked desktop also holds, so anyone holding
/// it could listen in the phone's place. It is upgraded when read (``load(path:)``): the identity
/// stays, a new listen token (so a new contact ID) replaces the old contact ID, and links made
/// under it end: their desktops get 410 ("contact ID unknown") and must link again.
public struct PhoneLinkStore: Sendable {
    /// The file name in the store directory.
    public static let fileName = "phone-link.json"
    /// The version this build writes (it reads 1 too, and upgrades it).
    public static let version = 2
    /// At most this many pairing IDs are kept per contact ID (oldest dropped first).
    public static let maxPairings = 256

    /// The state itself.
    public struct Identity: Codable, Sendable, Hashable {
        /// 32 random bytes; every link secret derives from it (`Derive(Derive(root, contact ID, 6), pairing ID, 4)`).
        public var rootSecret: [UInt8]
        /// The P-256 identity key's 32-byte scalar (linking-map key 4 is its public key).
        public var identityKey: [UInt8]
        /// The current listen token; desktops get its hash, ``contactID``.
        public var listenToken: ListenToken
        /// The name sent in linking-map key 5.
        public var name: String
        /// Pairing IDs handed out for ``contactID``; a contact request naming another one is refused.
        public var pairingIDs: [[UInt8]]
        /// Listen tokens revoked by `--unlink` (newest last, at most `PushChannel.maxRevoked`).
        public var revokedTokens: [ListenToken]
        enum CodingKeys: String, CodingKey, CaseIterable {
            case version, rootSecret, identityKey, listenToken, name, pairingIDs = "pairingIds"
            case revokedTokens = "revokedListenTokens"
            case contactID = "contactId"  // version 1
        }

        /// The current contact ID (SHA-256 of ``listenToken``, 32 bytes).
        public var contactID: [UInt8] { listenToken.contactID }
        /// The revoked contact IDs.
        public var revokedContactIDs: [[UInt8]] { revokedTokens.map(\.contactID) }

        /// Decodes and checks sizes (root 32, key a valid scalar, tokens 32, pairing IDs 8); a
        /// version-1 identity gets a fresh listen token and no pairing IDs.
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let version = try c.decode(Int.self, forKey: .version)
            guard version == PhoneLinkStore.version || version == 1 else {
                throw DecodingError.dataCorruptedError(
                    forKey: .version, in: c, debugDescription: "version \(version); this build reads versions 1 and \(PhoneLinkStore.version)")
            }
            rootSecret = try c.decodeBase64URL(forKey: .rootSecret)
            identityKey = try c.decodeBase64URL(forKey: .identityKey)
            name = try c.decode(String.self, forKey: .name)
            if version == 1 {
                // The contact ID was not secret: links made under it cannot be kept safely.
                let old: [UInt8] = try c.decodeBase64URL(forKey: .contactID)
                guard (1...256).contains(old.count) else {
                    throw DecodingError.dataCorruptedError(forKey: .contactID, in: c, debugDescription: "contact ID must be 1…256 bytes")
                }
                listenToken = ListenToken()
                pairingIDs = []
                revokedTokens = []
            } else {
                listenToken = try Self.token(try c.decode(String.self, forKey: .listenToken), key: .listenToken, in: c)
                pairingIDs = try c.decode([String].self, forKey: .pairingIDs).map { text in
                    guard let id = Base64URL.decode(text), id.count == HybridConstants.pairingIDSize else {
                        throw DecodingError.dataCorruptedError(forKey: .pairingIDs, in: c, debugDescription: "a pairing ID is not 8 bytes of base64url")
                    }
                    return id
                }
                revokedTokens = try c.decode([String].self, forKey: .revokedTokens).map { try Self.token($0, key: .revokedTokens, in: c) }
            }
            guard rootSecret.count == 32 else {
                throw DecodingError.dataCorruptedError(forKey: .rootSecret, in: c, debugDescription: "root secret must be 32 bytes")
            }
            guard (try? P256.KeyAgreement.PrivateKey(rawRepresentation: identityKey)) != nil else {
                throw DecodingError.dataCorruptedError(forKey: .identityKey, in: c, debugDescription: "not a P-256 private key")
            }
        }

        private static func token(_ text: String, key: CodingKeys, in c: KeyedDecodingContainer<CodingKeys>) throws -> ListenToken {
            guard let token = ListenToken(base64URL: text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: key, in: c, debugDescription: "a listen token is not \(ListenToken.size) bytes of unpadded base64url")
            }
            return token
        }

        /// Encodes with the version member (always the current version).
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(PhoneLinkStore.version, forKey: .version)
            try c.encodeBase64URL(rootSecret, forKey: .rootSecret)
            try c.encodeBase64URL(identityKey, forKey: .identityKey)
            try c.encode(listenToken.base64URL, forKey: .listenToken)
            try c.encode(name, forKey: .name)
            try c.encode(pairingIDs.map(Base64URL.encode), forKey: .pairingIDs)
            try c.encode(revokedTokens.map(\.base64URL), forKey: .revokedTokens)
        }

        /// A fresh identity from `random`.
        public init(random: RandomSource = .system, name: String = "HybridSim phone") {
            rootSecret = random.bytes(32)
            identityKey = Array(random.keyAgreementKey().rawRepresentation)
            listenToken = ListenToken(random: random)
            self.name = name
            pairingIDs = []
            revokedTokens = []
        }

        /// The identity key.
        public var privateKey: P256.KeyAgreement.PrivateKey {
            // Checked when decoded or created.
            (try? P256.KeyAgreement.PrivateKey(rawRepresentation: identityKey)) ?? P256.KeyAgreement.PrivateKey()
        }

        /// The link secret for `pairingID` under the current contact ID.
        public func linkSecret(pairingID: [UInt8]) -> [UInt8] {
            LinkingInfo.pairedSecret(rootSecret: rootSecret, contactID: contactID, pairingID: pairingID)
        }

        /// Hands out a new pairing ID and returns the linking identity for one QR session.
        public mutating func newLink(random: RandomSource = .system) -> AuthenticatorSession.LinkingIdentity {
            let pairingID = random.bytes(HybridConstants.pairingIDSize)
            pairingIDs.append(pairingID)
            if pairingIDs.count > PhoneLinkStore.maxPairings { pairingIDs.removeFirst(pairingIDs.count - PhoneLinkStore.maxPairings) }
            return AuthenticatorSession.LinkingIdentity(
                identityKey: privateKey, contactID: contactID, pairingID: pairingID,
                linkSecret: linkSecret(pairingID: pairingID), name: name)
        }

        /// `--unlink`: revokes the contact ID (every desktop's link answers 410 once the relay learns
        /// the revoked token) and starts a new one.
        public mutating func rotateContactID(random: RandomSource = .system) {
            revokedTokens.append(listenToken)
            if revokedTokens.count > PushChannel.maxRevoked {
                revokedTokens.removeFirst(revokedTokens.count - PushChannel.maxRevoked)
            }
            listenToken = ListenToken(random: random)
            pairingIDs = []
        }
    }

    /// The file.
    public let path: String
    /// The state, `nil` until the first QR ceremony with linking (or `--listen`) creates it.
    public var identity: Identity?

    /// An in-memory store.
    public init(path: String, identity: Identity? = nil) {
        self.path = path
        self.identity = identity
    }

    /// `phone-link.json` in the directory of `passkeyStorePath`.
    public static func path(besidePasskeyStore passkeyStorePath: String) -> String {
        (passkeyStorePath as NSString).deletingLastPathComponent.isEmpty
            ? fileName : (passkeyStorePath as NSString).deletingLastPathComponent + "/" + fileName
    }

    /// The version the file had when ``load(path:)`` upgraded it (1), or `nil`.
    public internal(set) var upgradedFromVersion: Int?

    /// Reads the store; a missing file has no identity. A version-1 file is upgraded on disk at once
    /// (under the store lock, so every phone process on the store gets the same new listen token) and
    /// ``upgradedFromVersion`` says so; its links end (``PhoneLinkStore``).
    /// - Throws: ``StoreError`` (`unreadable`, `notJSON`, `invalidDocument`, `unsupportedVersion`; for the upgrade,
    ///   `locked` when the store lock cannot be had and `writeFailed` when the file cannot be
    ///   written); a file that cannot be read is not modified. Only the upgrade takes the lock.
    public static func load(path: String) throws(StoreError) -> PhoneLinkStore {
        let stored = try read(path: path)
        guard stored.version == 1 else { return stored.store }
        return try StoreLock.withLock(path: path) { () throws(StoreError) -> PhoneLinkStore in
            let stored = try read(path: path)
            var current = stored.store
            // Another process may have upgraded it meanwhile: then its token stands.
            guard stored.version == 1, let identity = current.identity else { return current }
            try write(identity, keeping: stored.unknownMembers, to: path)
            current.upgradedFromVersion = 1
            return current
        }
    }

    /// What the file holds: its identity, the version it was written in (`nil`: no file), and its
    /// members this build does not know (kept when it rewrites the file).
    private struct Stored {
        var store: PhoneLinkStore
        var version: Int?
        var unknownMembers: [String: Any] = [:]
    }

    /// The members this build reads or writes, and version 1's revoked contact IDs (replaced by the
    /// revoked listen tokens, so dropped by the upgrade); any other is kept as it was on rewrite.
    private static let knownMembers = Set(Identity.CodingKeys.allCases.map(\.stringValue) + ["revokedContactIds"])

    /// Reads and decodes the file as it is (a version-1 identity upgraded in memory only), as strictly
    /// as the other stores (``StoreJSON``): not JSON, a member given twice, a version other than 1
    /// and 2 are refused.
    private static func read(path: String) throws(StoreError) -> Stored {
        guard let bytes = try AtomicFile.read(path: path) else { return Stored(store: PhoneLinkStore(path: path)) }
        let (members, fields) = try StoreJSON.object(bytes, path: path)
        let version = try StoreJSON.version(fields, path: path)
        guard version == Self.version || version == 1 else {
            throw StoreError(.unsupportedVersion, path: path, "version \(version); this build reads versions 1 and \(Self.version)")
        }
        do {
            let identity = try JSONDecoder().decode(Identity.self, from: Data(bytes))
            return Stored(
                store: PhoneLinkStore(path: path, identity: identity), version: version,
                unknownMembers: members.filter { !knownMembers.contains($0.key) })
        } catch let error as DecodingError {
            throw StoreError(.invalidDocument, path: path, DecodingWords.describe(error))
        } catch {
            throw StoreError(.invalidDocument, path: path, "\(error)")
        }
    }

    /// Writes the identity atomically with mode 0600, under the store lock, merged with the file as it
    /// is now: pairing IDs and revoked listen tokens recorded by another phone process on the same
    /// store are kept (union), and a contact ID revoked on either side stays revoked. A file holding a
    /// *different* identity (another process created one at the same moment) is not overwritten:
    /// ``StoreError`` `writeFailed` says so, and the links made with this process's identity must be
    /// made again.
    public func save() throws(StoreError) {
        guard let mine = identity else { return }
        try StoreLock.withLock(path: path) { () throws(StoreError) -> Void in
            var merged = mine
            let stored = try Self.read(path: path)
            if let disk = stored.store.identity, disk != mine {
                guard disk.rootSecret == mine.rootSecret, disk.identityKey == mine.identityKey else {
                    throw StoreError(
                        .writeFailed, path: path,
                        "another phone process created a different identity in this store meanwhile; nothing written")
                }
                merged = Self.merge(mine: mine, disk: disk)
            }
            try Self.write(merged, keeping: stored.unknownMembers, to: path)
        }
    }

    /// Writes `identity` as the current version with `unknownMembers` (a newer build's, kept as
    /// the other stores keep them), atomically, mode 0600 (the caller holds the lock).
    private static func write(_ identity: Identity, keeping unknownMembers: [String: Any], to path: String) throws(StoreError) {
        let bytes: [UInt8]
        do {
            var members = try JSONSerialization.jsonObject(with: JSONEncoder().encode(identity)) as? [String: Any] ?? [:]
            members.merge(unknownMembers) { known, _ in known }
            bytes = try StoreJSON.bytes(members)
        } catch {
            throw StoreError(.writeFailed, path: path, "cannot encode the store: \(error)")
        }
        try AtomicFile.write(bytes, to: path)
    }

    /// One identity written by two processes: unions of what each handed out or revoked.
    static func merge(mine: Identity, disk: Identity) -> Identity {
        var merged = mine
        merged.revokedTokens = disk.revokedTokens + mine.revokedTokens.filter { !disk.revokedTokens.contains($0) }
        if merged.revokedTokens.count > PushChannel.maxRevoked {
            merged.revokedTokens.removeFirst(merged.revokedTokens.count - PushChannel.maxRevoked)
        }
        // The other process rotated the contact ID after this one loaded: its rotation stands.
        if mine.listenToken != disk.listenToken, merged.revokedTokens.contains(mine.listenToken) {
            merged.listenToken = disk.listenToken
            merged.pairingIDs = disk.pairingIDs
            return merged
        }
        if mine.listenToken == disk.listenToken {
            merged.pairingIDs = disk.pairingIDs + mine.pairingIDs.filter { !disk.pairingIDs.contains($0) }
            if merged.pairingIDs.count > PhoneLinkStore.maxPairings {
                merged.pairingIDs.removeFirst(merged.pairingIDs.count - PhoneLinkStore.maxPairings)
            }
        }
        return merged
    }
}
