import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridRuntime

/// The phone's linking state on disk, `phone-link.json` next to the passkey store (Docs/STORES.md,
/// Docs/LINKING.md): its root secret and identity key (created once), its current contact ID (our
/// stand-in for an FCM registration token), the pairing IDs it handed out for that contact ID, and
/// the contact IDs it revoked with `--unlink`.
///
/// ```json
/// {"version": 1, "rootSecret": "…", "identityKey": "…", "contactId": "…", "name": "HybridSim phone",
///  "pairingIds": ["…"], "revokedContactIds": ["…"]}
/// ```
/// Byte strings are unpadded base64url. Written like the other stores: atomically, mode 0600.
public struct PhoneLinkStore: Sendable {
    /// The file name in the store directory.
    public static let fileName = "phone-link.json"
    /// The only version this build reads and writes.
    public static let version = 1
    /// At most this many pairing IDs are kept per contact ID (oldest dropped first).
    public static let maxPairings = 256

    /// The state itself.
    public struct Identity: Codable, Sendable, Hashable {
        /// 32 random bytes; every link secret derives from it (`Derive(Derive(root, contact ID, 6), pairing ID, 4)`).
        public var rootSecret: [UInt8]
        /// The P-256 identity key's 32-byte scalar (linking-map key 4 is its public key).
        public var identityKey: [UInt8]
        /// The current contact ID (32 random bytes).
        public var contactID: [UInt8]
        /// The name sent in linking-map key 5.
        public var name: String
        /// Pairing IDs handed out for ``contactID``; a contact request naming another one is refused.
        public var pairingIDs: [[UInt8]]
        /// Contact IDs revoked by `--unlink` (newest last, at most `PushChannel.maxRevoked`).
        public var revokedContactIDs: [[UInt8]]

        enum CodingKeys: String, CodingKey {
            case version, rootSecret, identityKey, contactID = "contactId", name, pairingIDs = "pairingIds"
            case revokedContactIDs = "revokedContactIds"
        }

        /// Decodes and checks sizes (root 32, key a valid scalar, contact ID 1…256, pairing IDs 8).
        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            let version = try c.decode(Int.self, forKey: .version)
            guard version == PhoneLinkStore.version else {
                throw DecodingError.dataCorruptedError(
                    forKey: .version, in: c, debugDescription: "version \(version); this build reads version \(PhoneLinkStore.version)")
            }
            rootSecret = try c.decodeBase64URL(forKey: .rootSecret)
            identityKey = try c.decodeBase64URL(forKey: .identityKey)
            contactID = try c.decodeBase64URL(forKey: .contactID)
            name = try c.decode(String.self, forKey: .name)
            pairingIDs = try c.decode([String].self, forKey: .pairingIDs).map { text in
                guard let id = Base64URL.decode(text), id.count == HybridConstants.pairingIDSize else {
                    throw DecodingError.dataCorruptedError(forKey: .pairingIDs, in: c, debugDescription: "a pairing ID is not 8 bytes of base64url")
                }
                return id
            }
            revokedContactIDs = try c.decode([String].self, forKey: .revokedContactIDs).map { text in
                guard let id = Base64URL.decode(text), !id.isEmpty else {
                    throw DecodingError.dataCorruptedError(forKey: .revokedContactIDs, in: c, debugDescription: "a contact ID is not base64url")
                }
                return id
            }
            guard rootSecret.count == 32 else {
                throw DecodingError.dataCorruptedError(forKey: .rootSecret, in: c, debugDescription: "root secret must be 32 bytes")
            }
            guard (try? P256.KeyAgreement.PrivateKey(rawRepresentation: identityKey)) != nil else {
                throw DecodingError.dataCorruptedError(forKey: .identityKey, in: c, debugDescription: "not a P-256 private key")
            }
            guard (1...256).contains(contactID.count) else {
                throw DecodingError.dataCorruptedError(forKey: .contactID, in: c, debugDescription: "contact ID must be 1…256 bytes")
            }
        }

        /// Encodes with the version member.
        public func encode(to encoder: any Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(PhoneLinkStore.version, forKey: .version)
            try c.encodeBase64URL(rootSecret, forKey: .rootSecret)
            try c.encodeBase64URL(identityKey, forKey: .identityKey)
            try c.encodeBase64URL(contactID, forKey: .contactID)
            try c.encode(name, forKey: .name)
            try c.encode(pairingIDs.map(Base64URL.encode), forKey: .pairingIDs)
            try c.encode(revokedContactIDs.map(Base64URL.encode), forKey: .revokedContactIDs)
        }

        /// A fresh identity from `random`.
        public init(random: RandomSource = .system, name: String = "HybridSim phone") {
            rootSecret = random.bytes(32)
            identityKey = Array(random.keyAgreementKey().rawRepresentation)
            contactID = random.bytes(32)
            self.name = name
            pairingIDs = []
            revokedContactIDs = []
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

        /// `--unlink`: revokes the contact ID (every desktop's link answers 410 from then on) and starts a new one.
        public mutating func rotateContactID(random: RandomSource = .system) {
            revokedContactIDs.append(contactID)
            if revokedContactIDs.count > PushChannel.maxRevoked {
                revokedContactIDs.removeFirst(revokedContactIDs.count - PushChannel.maxRevoked)
            }
            contactID = random.bytes(32)
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

    /// Reads the store; a missing file has no identity.
    /// - Throws: ``StoreError`` (`unreadable`, `notJSON`, `invalidDocument`); the file is not modified.
    public static func load(path: String) throws(StoreError) -> PhoneLinkStore {
        guard let bytes = try AtomicFile.read(path: path) else { return PhoneLinkStore(path: path) }
        do {
            return PhoneLinkStore(path: path, identity: try JSONDecoder().decode(Identity.self, from: Data(bytes)))
        } catch let error as DecodingError {
            throw StoreError(.invalidDocument, path: path, Self.describe(error))
        } catch {
            throw StoreError(.notJSON, path: path, "\(error)")
        }
    }

    /// Writes the identity atomically with mode 0600, under the store lock, merged with the file as it
    /// is now: pairing IDs and revoked contact IDs handed out by another phone process on the same
    /// store are kept (union), and a contact ID revoked on either side stays revoked. A file holding a
    /// *different* identity (another process created one at the same moment) is not overwritten:
    /// ``StoreError`` `writeFailed` says so, and the links made with this process's identity must be
    /// made again.
    public func save() throws(StoreError) {
        guard let mine = identity else { return }
        try StoreLock.withLock(path: path) { () throws(StoreError) -> Void in
            var merged = mine
            if let disk = try Self.load(path: path).identity, disk != mine {
                guard disk.rootSecret == mine.rootSecret, disk.identityKey == mine.identityKey else {
                    throw StoreError(
                        .writeFailed, path: path,
                        "another phone process created a different identity in this store meanwhile; nothing written")
                }
                merged = Self.merge(mine: mine, disk: disk)
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            let data: Data
            do {
                data = try encoder.encode(merged)
            } catch {
                throw StoreError(.writeFailed, path: path, "cannot encode the store: \(error)")
            }
            try AtomicFile.write(Array(data) + [UInt8(ascii: "\n")], to: path)
        }
    }

    /// One identity written by two processes: unions of what each handed out or revoked.
    static func merge(mine: Identity, disk: Identity) -> Identity {
        var merged = mine
        merged.revokedContactIDs = disk.revokedContactIDs + mine.revokedContactIDs.filter { !disk.revokedContactIDs.contains($0) }
        if merged.revokedContactIDs.count > PushChannel.maxRevoked {
            merged.revokedContactIDs.removeFirst(merged.revokedContactIDs.count - PushChannel.maxRevoked)
        }
        // The other process rotated the contact ID after this one loaded: its rotation stands.
        if mine.contactID != disk.contactID, merged.revokedContactIDs.contains(mine.contactID) {
            merged.contactID = disk.contactID
            merged.pairingIDs = disk.pairingIDs
            return merged
        }
        if mine.contactID == disk.contactID {
            merged.pairingIDs = disk.pairingIDs + mine.pairingIDs.filter { !disk.pairingIDs.contains($0) }
            if merged.pairingIDs.count > PhoneLinkStore.maxPairings {
                merged.pairingIDs.removeFirst(merged.pairingIDs.count - PhoneLinkStore.maxPairings)
            }
        }
        return merged
    }

    private static func describe(_ error: DecodingError) -> String {
        switch error {
        case .keyNotFound(let key, _): return "\(key.stringValue): missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\(context.codingPath.map(\.stringValue).joined(separator: ".")): wrong type"
        case .dataCorrupted(let context):
            let at = context.codingPath.map(\.stringValue).joined(separator: ".")
            return at.isEmpty ? context.debugDescription : "\(at): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }
}
