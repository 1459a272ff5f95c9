import CTAP2
import Foundation
import HybridCore
import HybridRuntime
import HybridSim

/// The linking state on disk (Docs/STORES.md): the relay's contact memory (`relay --contacts
/// FILE`), the desktop's `links.json` and the phone's `phone-link.json`, read from a real file as
/// the programs read them (``StoreTargets/write(_:_:)``).
///
/// Each target loads the file twice (a load must not depend on anything but the file; the phone's
/// store rewrites a version-1 file when it loads it, so the second load reads the upgrade), then
/// saves what it loaded into a fresh file and loads that: what a program read, it can write back.
enum LinkStoreTargets {
    static let all = [relayContactFile, linkStore, phoneLinkStore]

    /// A fresh path for the round trip: the file and its lock file removed.
    static func fresh(_ name: String) -> String {
        let path = StoreTargets.directory + "/roundtrip-" + name
        try? FileManager.default.removeItem(atPath: path)
        return path
    }

    static func contactID(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: RelayContactFile.contactIDSize) }

    /// `RelayContactFile.load(path:)`: loads the same twice, and a save of it loads the same.
    static let relayContactFile = FuzzTarget(
        "relay-contact-file",
        "RelayContactFile.load(path:) (relay --contacts FILE); loads deterministically, 32-byte IDs, and save then load gives the same memory",
        seeds: {
            [
                StoreTargets.saved(
                    { try RelayContactFile.save(RelayContactMemory(known: [contactID(1), contactID(2)], revoked: [contactID(3)]), to: $0) },
                    "contacts.json"),
                StoreTargets.saved({ try RelayContactFile.save(RelayContactMemory(), to: $0) }, "contacts.json"),
                Array(#"{"version":1,"known":["\#(Base64URL.encode(contactID(9)))"]}"#.utf8),
            ]
        }
    ) { input in
        let path = StoreTargets.write(input, "contacts.json")
        guard let memory = try? RelayContactFile.load(path: path) else { return .rejected }
        guard (try? RelayContactFile.load(path: path)) == memory,
            (memory.known + memory.revoked).allSatisfy({ $0.count == RelayContactFile.contactIDSize })
        else {
            return .violation("contacts file \(input.fuzzHex) loads inconsistently")
        }
        let copy = fresh("contacts.json")
        do {
            try RelayContactFile.save(memory, to: copy)
        } catch {
            return .violation("the memory loaded from \(input.fuzzHex) cannot be saved: \(error)")
        }
        let again = try? RelayContactFile.load(path: copy)
        return FuzzTarget.check(again == memory, "contacts file \(input.fuzzHex) does not survive save and load")
    }

    static func link(_ byte: UInt8, name: String, domain: UInt16 = 0, linkedAt: UInt64 = 1_760_000_000) -> StoredLink {
        let info = LinkingInfo(
            contactID: Array(repeating: byte, count: 32), pairingID: Array(repeating: byte, count: 8),
            linkSecret: Array(repeating: byte &+ 1, count: 32),
            authenticatorPublicKey: Array(FuzzKeys.key(byte).publicKey.x963Representation), name: name,
            handshakeSignature: Array(repeating: 0, count: 32))
        return StoredLink(info, tunnelDomain: domain, linkedAt: linkedAt)
    }

    /// `LinkStore.load(path:)`: loads the same twice with unique names, and a save of it loads as
    /// ``LinkStore/upsert(_:)`` of each link into an empty store gives (the same links, when no two
    /// share a public key).
    static let linkStore = FuzzTarget(
        "link-store",
        "LinkStore.load(path:) (the desktop's links.json); loads deterministically with unique names, and save then load gives the links (as upsert keeps them)",
        seeds: {
            [
                StoreTargets.saved(
                    { try LinkStore(path: $0, links: [link(4, name: "Pixel"), link(5, name: "Pixel (1)", domain: 1)]).save() },
                    LinkStore.fileName),
                StoreTargets.saved({ try LinkStore(path: $0, links: [link(6, name: "Phone", domain: 300)]).save() }, LinkStore.fileName),
            ]
        }
    ) { input in
        let path = StoreTargets.write(input, LinkStore.fileName)
        guard let store = try? LinkStore.load(path: path) else { return .rejected }
        guard (try? LinkStore.load(path: path))?.links == store.links, Set(store.links.map(\.name)).count == store.links.count else {
            return .violation("links.json \(input.fuzzHex) loads inconsistently")
        }
        var expected = LinkStore(path: "", links: [])
        for link in store.links { expected.upsert(link) }
        if Set(store.links.map(\.publicKey)).count == store.links.count, expected.links != store.links {
            return .violation("upsert renames or drops links of \(input.fuzzHex) that share no public key")
        }
        let copy = fresh(LinkStore.fileName)
        do {
            try LinkStore(path: copy, links: store.links).save()
        } catch {
            return .violation("the links loaded from \(input.fuzzHex) cannot be saved: \(error)")
        }
        let again = try? LinkStore.load(path: copy)
        return FuzzTarget.check(again?.links == expected.links, "links.json \(input.fuzzHex) does not survive save and load")
    }

    /// A phone identity with two links, one revoked contact ID and a link under the new one.
    static func identity(name: String = "HybridSim phone") -> PhoneLinkStore.Identity {
        let random = RandomSource.deterministic(seed: Array(name.utf8))
        var identity = PhoneLinkStore.Identity(random: random, name: name)
        _ = identity.newLink(random: random)
        _ = identity.newLink(random: random)
        identity.rotateContactID(random: random)
        _ = identity.newLink(random: random)
        return identity
    }

    /// A version-1 file (the contact ID itself, no listen token): upgraded when loaded.
    static let versionOne: [UInt8] = {
        let old = identity(name: "Old phone")
        return Array(
            ("{\"version\": 1, \"rootSecret\": \"\(Base64URL.encode(old.rootSecret))\", \"identityKey\": \""
                + Base64URL.encode(old.identityKey) + "\", \"contactId\": \"ZXhhbXBsZS1mY20tdG9rZW4\", \"name\": \"Old phone\"}\n").utf8)
    }()

    /// `PhoneLinkStore.load(path:)`: loads the same twice (a version-1 file is upgraded by the
    /// first load), and a save of the identity loads the same.
    static let phoneLinkStore = FuzzTarget(
        "phone-link-store",
        "PhoneLinkStore.load(path:) (the phone's phone-link.json, versions 1 and 2); loads deterministically, and save then load gives the same identity",
        seeds: {
            [
                StoreTargets.saved({ try PhoneLinkStore(path: $0, identity: identity()).save() }, PhoneLinkStore.fileName),
                StoreTargets.saved({ try PhoneLinkStore(path: $0, identity: .init(random: .deterministic(seed: [7]))).save() }, PhoneLinkStore.fileName),
                versionOne,
            ]
        }
    ) { input in
        let path = StoreTargets.write(input, PhoneLinkStore.fileName)
        guard let store = try? PhoneLinkStore.load(path: path), let identity = store.identity else { return .rejected }
        guard (try? PhoneLinkStore.load(path: path))?.identity == identity else {
            return .violation("phone-link.json \(input.fuzzHex) loads inconsistently")
        }
        guard identity.rootSecret.count == 32, identity.contactID.count == 32,
            identity.pairingIDs.allSatisfy({ $0.count == HybridConstants.pairingIDSize })
        else {
            return .violation("phone-link.json \(input.fuzzHex) loads with a wrong-sized secret or ID")
        }
        let copy = fresh(PhoneLinkStore.fileName)
        do {
            try PhoneLinkStore(path: copy, identity: identity).save()
        } catch {
            return .violation("the identity loaded from \(input.fuzzHex) cannot be saved: \(error)")
        }
        let again = try? PhoneLinkStore.load(path: copy)
        return FuzzTarget.check(again?.identity == identity, "phone-link.json \(input.fuzzHex) does not survive save and load")
    }
}
