import CTAP2
import Foundation
import HybridCore

/// One linked phone as the desktop stores it (Chromium keeps the same record; Windows calls it
/// `CTAPCBOR_HYBRID_STORAGE_LINKED_DATA`): everything needed to contact the phone again.
public struct StoredLink: Codable, Sendable, Hashable {
    /// The phone's name (linking-map key 5); links are stored and chosen by it.
    public var name: String
    /// Key 1.
    public var contactID: [UInt8]
    /// Key 2 (8 bytes).
    public var pairingID: [UInt8]
    /// Key 3 (32 bytes).
    public var linkSecret: [UInt8]
    /// Key 4 (65 bytes).
    public var publicKey: [UInt8]
    /// The tunnel-server domain ID of the QR session that created the link (0: cable.ua5v.com).
    public var tunnelDomain: UInt16
    /// When it was stored, seconds since the Unix epoch.
    public var linkedAt: UInt64

    /// The record for verified linking information.
    public init(_ info: LinkingInfo, tunnelDomain: UInt16, linkedAt: UInt64) {
        name = info.name
        contactID = info.contactID
        pairingID = info.pairingID
        linkSecret = info.linkSecret
        publicKey = info.authenticatorPublicKey
        self.tunnelDomain = tunnelDomain
        self.linkedAt = linkedAt
    }

    /// The session's view of the link.
    public var link: LinkedClientSession.Link {
        LinkedClientSession.Link(contactID: contactID, pairingID: pairingID, linkSecret: linkSecret, authenticatorPublicKey: publicKey)
    }

    enum CodingKeys: String, CodingKey {
        case name, contactID = "contactId", pairingID = "pairingId", linkSecret, publicKey, tunnelDomain, linkedAt
    }

    /// Decodes and checks sizes.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(String.self, forKey: .name)
        contactID = try c.decodeBase64URL(forKey: .contactID)
        pairingID = try c.decodeBase64URL(forKey: .pairingID)
        linkSecret = try c.decodeBase64URL(forKey: .linkSecret)
        publicKey = try c.decodeBase64URL(forKey: .publicKey)
        tunnelDomain = try c.decode(UInt16.self, forKey: .tunnelDomain)
        linkedAt = try c.decode(UInt64.self, forKey: .linkedAt)
        guard !name.isEmpty else { throw DecodingError.dataCorruptedError(forKey: .name, in: c, debugDescription: "empty name") }
        guard TunnelDomainID(rawValue: tunnelDomain).host != nil else {
            // PROTOCOL.md §4.1: 0 and 1 are assigned, 2…255 name no tunnel service, 256 and up are hashed.
            throw DecodingError.dataCorruptedError(
                forKey: .tunnelDomain, in: c, debugDescription: "tunnel domain \(tunnelDomain) names no tunnel service (2…255 are unassigned)")
        }
        guard !contactID.isEmpty else { throw DecodingError.dataCorruptedError(forKey: .contactID, in: c, debugDescription: "empty") }
        guard pairingID.count == HybridConstants.pairingIDSize else {
            throw DecodingError.dataCorruptedError(forKey: .pairingID, in: c, debugDescription: "pairing ID must be 8 bytes")
        }
        guard linkSecret.count == 32 else {
            throw DecodingError.dataCorruptedError(forKey: .linkSecret, in: c, debugDescription: "link secret must be 32 bytes")
        }
        guard publicKey.count == HybridConstants.uncompressedPublicKeySize else {
            throw DecodingError.dataCorruptedError(forKey: .publicKey, in: c, debugDescription: "public key must be 65 bytes")
        }
    }

    /// Encodes byte strings as unpadded base64url.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(name, forKey: .name)
        try c.encodeBase64URL(contactID, forKey: .contactID)
        try c.encodeBase64URL(pairingID, forKey: .pairingID)
        try c.encodeBase64URL(linkSecret, forKey: .linkSecret)
        try c.encodeBase64URL(publicKey, forKey: .publicKey)
        try c.encode(tunnelDomain, forKey: .tunnelDomain)
        try c.encode(linkedAt, forKey: .linkedAt)
    }
}

/// The desktop's linked phones on disk: `{"version": 1, "links": [StoredLink, …]}`, by default
/// `links.json` next to the relying-party store; same reading rules and atomic 0600 writes as the
/// other stores (Docs/STORES.md). As Chromium keeps its pairings: a new link from the same phone (the
/// same public key, which the phone proved it holds in the handshake) replaces the old one, and a
/// link from another phone whose name is taken is stored as "NAME (1)", "NAME (2)", …, so names
/// stay unique and every link can be chosen with `--linked NAME`.
public struct LinkStore: Sendable {
    /// The file name in the store directory.
    public static let fileName = "links.json"

    /// The file.
    public let path: String
    /// The links, in file order.
    public var links: [StoredLink]

    /// An in-memory store.
    public init(path: String, links: [StoredLink] = []) {
        self.path = path
        self.links = links
    }

    /// `links.json` in the directory of `rpStorePath`.
    public static func path(besideRPStore rpStorePath: String) -> String {
        let directory = (rpStorePath as NSString).deletingLastPathComponent
        return directory.isEmpty ? fileName : directory + "/" + fileName
    }

    /// A links file that cannot be used, in the programs' words: bad input (exit 2; a failure, 1,
    /// when the machine failed: ``StoreError/failureKind``), what is wrong with the file and that
    /// it is left as it is.
    static func unusable(_ error: StoreError) -> ProgramFailure {
        ProgramFailure(error.failureKind, "cannot use the links file: \(error)\(error.advice)")
    }

    /// Reads the store; a missing file is empty.
    public static func load(path: String) throws(StoreError) -> LinkStore {
        LinkStore(path: path, links: try StoreDocument<Kind>.load(path: path) ?? [])
    }

    /// Writes atomically with mode 0600, merged under the store lock with what is on disk now: the
    /// disk's links of phones this store holds no link of are kept, and these links replace the
    /// disk's links of their phones (same public key), each under its own name or, when another
    /// phone's link kept from the disk has it, "NAME (1)", … as in ``upsert(_:)``. Every link held
    /// here is written: two links of one phone (a hand edit, or a file written before saves merged
    /// by public key) stay two rather than one silently replacing the other.
    public func save() throws(StoreError) {
        let links = self.links
        _ = try StoreDocument<Kind>.update(path: path) { disk throws(StoreError) -> Bool in
            let phones = Set(links.map(\.publicKey))
            var merged = LinkStore(path: path, links: disk.filter { !phones.contains($0.publicKey) })
            for link in links { merged.insert(link) }
            disk = merged.links
            return true
        }
    }

    /// Stores `link` under the store lock (``upsert(_:)``): one read-modify-write of the file as it
    /// is now, so a concurrent run's links are kept.
    /// - Returns: the name the link was stored under.
    @discardableResult
    public static func upsert(_ link: StoredLink, path: String) throws(StoreError) -> String {
        var stored = link.name
        _ = try StoreDocument<Kind>.update(path: path) { links throws(StoreError) -> Bool in
            var store = LinkStore(path: path, links: links)
            stored = store.upsert(link)
            links = store.links
            return true
        }
        return stored
    }

    /// Removes the link named `name` if it still has `contactID` (another run may have replaced it
    /// with a newer link meanwhile), under the store lock. Returns whether a link was removed.
    @discardableResult
    public static func remove(name: String, contactID: [UInt8], path: String) throws(StoreError) -> Bool {
        try !remove(path: path) { $0.name == name && $0.contactID == contactID }.removed.isEmpty
    }

    /// Removes the links `matching` picks, under the store lock (the file is written only when one
    /// was removed). Returns the names removed and the names the file held before.
    public static func remove(
        path: String, matching: (StoredLink) -> Bool
    ) throws(StoreError) -> (removed: [String], before: [String]) {
        var result: (removed: [String], before: [String]) = ([], [])
        _ = try StoreDocument<Kind>.update(path: path) { links throws(StoreError) -> Bool in
            result = (links.filter(matching).map(\.name), links.map(\.name))
            links.removeAll(where: matching)
            return !result.removed.isEmpty
        }
        return result
    }

    /// Appends `link`, first removing any link with its public key (the same phone linked again);
    /// when another phone's link has its name, it is stored as the first free "NAME (1)",
    /// "NAME (2)", … (Chromium's `AddPairing` and `FindUniqueName`).
    /// - Returns: the name it was stored under.
    @discardableResult
    public mutating func upsert(_ link: StoredLink) -> String {
        links.removeAll { $0.publicKey == link.publicKey }
        return insert(link)
    }

    /// Appends `link` under its name, or the first free "NAME (1)", "NAME (2)", … when a link
    /// here has it. Returns the name it was stored under.
    @discardableResult
    private mutating func insert(_ link: StoredLink) -> String {
        var stored = link
        var counter = 0
        while links.contains(where: { $0.name == stored.name }) {
            counter += 1
            stored.name = "\(link.name) (\(counter))"
        }
        links.append(stored)
        return stored.name
    }

    /// `NAME`, or the only link for `any`.
    /// - Throws: ``ProgramFailure`` `badInput` naming the links there are.
    public func select(_ name: String) throws(ProgramFailure) -> StoredLink {
        if name == "any" {
            guard links.count == 1, let only = links.first else {
                let names = links.map { "\"\($0.name)\"" }.joined(separator: ", ")
                throw ProgramFailure(
                    .badInput,
                    links.isEmpty
                        ? "no linked phone in \(path): link one first with --link"
                        : "--linked any needs exactly one link; \(path) has \(links.count): \(names)")
            }
            return only
        }
        guard let link = links.first(where: { $0.name == name }) else {
            let names = links.isEmpty ? "none" : links.map { "\"\($0.name)\"" }.joined(separator: ", ")
            let how = links.isEmpty ? "; a registration with --link makes one" : ""
            throw ProgramFailure(.badInput, "no linked phone named \"\(name)\" in \(path) (links: \(names)\(how))")
        }
        return link
    }

    enum Kind: StoreKind {
        static let entriesKey = "links"
        static let identifierName = "name"
        static func identifier(of entry: StoredLink) -> [UInt8] { Array(entry.name.utf8) }
        static let knownMembers: Set<String> = [
            "name", "contactId", "pairingId", "linkSecret", "publicKey", "tunnelDomain", "linkedAt",
        ]
        static let unsignedIntegerMembers: [String: UInt64] = [
            "tunnelDomain": UInt64(UInt16.max), "linkedAt": UInt64.max,
        ]
        /// A link stored again under its name is the same record only with the same phone, contact ID
        /// and pairing ID: a phone linked again (a new pairing ID) does not inherit the old link's
        /// unknown members.
        static func isSameRecord(_ entry: StoredLink, as disk: StoredLink) -> Bool {
            entry.publicKey == disk.publicKey && entry.contactID == disk.contactID && entry.pairingID == disk.pairingID
        }
        /// Two records with one name (``save()`` and ``upsert(_:)`` never pass such a pair here; the
        /// store kind needs an answer): the newer record wins.
        static func merged(mine: StoredLink, disk: StoredLink) -> StoredLink {
            mine.linkedAt >= disk.linkedAt ? mine : disk
        }
    }
}
