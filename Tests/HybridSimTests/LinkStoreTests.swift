import CTAP2
import Crypto
import Foundation
import HybridCore
import HybridSim
import Synchronization
import Testing

/// The desktop's `links.json` and the phone's `phone-link.json`: round trips, 0600, strict loading.
@Suite struct LinkStoreTests {
    func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-links-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("links.json: upsert as Chromium pairs (same phone replaces, another phone with a taken name gets \"NAME (1)\"), round trip, --linked NAME / any selection with clear errors")
    func links() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = LinkStore.path(besideRPStore: dir + "/rp-credentials.json")
        #expect(path == dir + "/links.json")
        let pixel = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        func info(_ name: String, _ contact: UInt8, key: [UInt8] = pixel) -> LinkingInfo {
            LinkingInfo(
                contactID: [contact], pairingID: Array(1...8), linkSecret: Array(repeating: contact, count: 32),
                authenticatorPublicKey: key, name: name, handshakeSignature: Array(repeating: 0, count: 32))
        }
        var store = try LinkStore.load(path: path)
        #expect(store.links.isEmpty)
        #expect(throws: ProgramFailure.self) { try store.select("any") }
        let none = #expect(throws: ProgramFailure.self) { try store.select("bob") }
        #expect(none?.message == "no linked phone named \"bob\" in \(path) (links: none; a registration with --link makes one)")
        #expect(store.upsert(StoredLink(info("Pixel", 1), tunnelDomain: 0, linkedAt: 5)) == "Pixel")
        // The same phone (public key) linked again, even under another name: it replaces its old link.
        #expect(store.upsert(StoredLink(info("Pixel 8", 2), tunnelDomain: 0, linkedAt: 6)) == "Pixel 8")
        #expect(store.links.map(\.contactID) == [[2]])
        #expect(store.upsert(StoredLink(info("Pixel", 3), tunnelDomain: 0, linkedAt: 7)) == "Pixel")
        try store.save()
        let loaded = try LinkStore.load(path: path)
        #expect(loaded.links.count == 1)
        #expect(loaded.links[0].contactID == [3])
        #expect(try loaded.select("any").name == "Pixel")
        #expect(try loaded.select("Pixel").linkedAt == 7)
        // Other phones with a taken name are kept beside it, each under a name of its own.
        let other = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        let third = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        #expect(try LinkStore.upsert(StoredLink(info("Pixel", 4, key: other), tunnelDomain: 0, linkedAt: 8), path: path) == "Pixel (1)")
        #expect(try LinkStore.upsert(StoredLink(info("Pixel", 5, key: third), tunnelDomain: 0, linkedAt: 9), path: path) == "Pixel (2)")
        // The second phone again: its link is replaced, and its name is free again.
        #expect(try LinkStore.upsert(StoredLink(info("Pixel", 6, key: other), tunnelDomain: 0, linkedAt: 10), path: path) == "Pixel (1)")
        let three = try LinkStore.load(path: path)
        #expect(three.links.map(\.name).sorted() == ["Pixel", "Pixel (1)", "Pixel (2)"])
        #expect(try three.select("Pixel (1)").contactID == [6])
        #expect(try three.select("Pixel (2)").publicKey == third)
        #expect(throws: ProgramFailure.self) { try three.select("any") }
        // save() merges by the same rules: a store read before those links were added neither
        // duplicates the first phone (same key, new name) nor takes the second phone's name.
        var stale = LinkStore(path: path)
        stale.upsert(StoredLink(info("My Pixel", 7), tunnelDomain: 0, linkedAt: 11))
        stale.upsert(StoredLink(info("Pixel (1)", 8, key: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)),
                                tunnelDomain: 0, linkedAt: 12))
        try stale.save()
        let merged = try LinkStore.load(path: path)
        #expect(merged.links.map(\.name).sorted() == ["My Pixel", "Pixel (1)", "Pixel (1) (1)", "Pixel (2)"])
        #expect(merged.links.filter { $0.publicKey == pixel }.map(\.contactID) == [[7]])
        #expect(try merged.select("Pixel (1)").publicKey == other)
        do {
            _ = try merged.select("iPhone")
            Issue.record("an unknown name was selected")
        } catch {
            #expect(error.kind == .badInput)
            #expect(error.message.contains("no linked phone named \"iPhone\"") && error.message.contains("\"My Pixel\""))
        }
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        try Data(#"{"version":1,"links":[{"name":"x","contactId":"AQ","pairingId":"AQ","linkSecret":"AQ","publicKey":"AQ","tunnelDomain":0,"linkedAt":0}]}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect(throws: StoreError.self) { _ = try LinkStore.load(path: path) }
    }

    @Test("links.json: a tunnel domain out of range or naming no tunnel service is a clear error naming the member")
    func tunnelDomainChecked() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/links.json"
        var store = try LinkStore.load(path: path)
        let info = LinkingInfo(
            contactID: [1, 2, 3], pairingID: Array(repeating: 2, count: 8), linkSecret: Array(repeating: 3, count: 32),
            authenticatorPublicKey: P256.KeyAgreement.PrivateKey().publicKey.x963Representation.map { $0 }, name: "Pixel",
            handshakeSignature: Array(repeating: 4, count: 32))
        store.links = [StoredLink(info, tunnelDomain: 0, linkedAt: 1)]
        try store.save()
        let saved = try String(contentsOfFile: path, encoding: .utf8)
        for (domain, mention) in [
            ("70000", "links[0].tunnelDomain: tunnelDomain must be a whole number from 0 to 65535"),
            ("5", "tunnel domain 5 names no tunnel service (2…255 are unassigned)"),
        ] {
            try saved.replacingOccurrences(of: "\"tunnelDomain\" : 0", with: "\"tunnelDomain\" : \(domain)")
                .write(toFile: path, atomically: true, encoding: .utf8)
            let error = #expect(throws: StoreError.self) { _ = try LinkStore.load(path: path) }
            #expect(error.map { "\($0)".contains(mention) } == true, "\(String(describing: error))")
        }
    }

    @Test("links.json holding two links of one phone (a hand edit, an older save): both load and are chosen by name, save() keeps both, a new link of that phone replaces both")
    func twoLinksForOnePhone() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/links.json"
        let key = P256.KeyAgreement.PrivateKey().publicKey.x963Representation.map { $0 }
        func link(_ name: String, _ contact: UInt8, key: [UInt8] = key) -> StoredLink {
            StoredLink(
                LinkingInfo(
                    contactID: [contact], pairingID: Array(repeating: 2, count: 8), linkSecret: Array(repeating: 3, count: 32),
                    authenticatorPublicKey: key, name: name, handshakeSignature: Array(repeating: 4, count: 32)),
                tunnelDomain: 0, linkedAt: UInt64(contact))
        }
        try LinkStore.upsert(link("Pixel", 1), path: path)
        // The hand edit: the same phone's entry again under another name and contact ID.
        var object = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var links = try #require(object["links"] as? [[String: Any]])
        var copy = links[0]
        copy["name"] = "Pixel at work"
        copy["contactId"] = "Ag"
        links.append(copy)
        object["links"] = links
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        var store = try LinkStore.load(path: path)
        #expect(store.links.map(\.name) == ["Pixel", "Pixel at work"])
        #expect(try store.select("Pixel at work").contactID == [2])
        // A save of what was loaded (plus another phone's link) writes every link it holds.
        store.upsert(link("Galaxy", 3, key: P256.KeyAgreement.PrivateKey().publicKey.x963Representation.map { $0 }))
        try store.save()
        #expect(try LinkStore.load(path: path).links.map(\.name) == ["Pixel", "Pixel at work", "Galaxy"])
        // That phone linked again: its new link replaces both old ones.
        #expect(try LinkStore.upsert(link("Pixel 9", 4), path: path) == "Pixel 9")
        #expect(try LinkStore.load(path: path).links.map(\.name) == ["Galaxy", "Pixel 9"])
    }

    @Test("phone-link.json: created identity round trips; unlink revokes the contact ID; a damaged file is a clear error")
    func phoneIdentity() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = PhoneLinkStore.path(besidePasskeyStore: dir + "/passkeys.json")
        #expect(try PhoneLinkStore.load(path: path).identity == nil)
        var identity = PhoneLinkStore.Identity()
        let linking = identity.newLink()
        #expect(linking.linkSecret == LinkingInfo.pairedSecret(
            rootSecret: identity.rootSecret, contactID: identity.contactID, pairingID: linking.pairingID))
        try PhoneLinkStore(path: path, identity: identity).save()
        let loaded = try #require(try PhoneLinkStore.load(path: path).identity)
        #expect(loaded == identity)
        #expect(loaded.pairingIDs == [linking.pairingID])
        var rotated = loaded
        rotated.rotateContactID()
        #expect(rotated.revokedContactIDs == [identity.contactID])
        #expect(rotated.contactID != identity.contactID)
        #expect(rotated.pairingIDs.isEmpty)
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        try Data(#"{"version":1,"rootSecret":"AQ","identityKey":"AQ","contactId":"AQ","name":"x","pairingIds":[],"revokedContactIds":[]}"#.utf8)
            .write(to: URL(fileURLWithPath: path))
        do {
            _ = try PhoneLinkStore.load(path: path)
            Issue.record("a 1-byte root secret was accepted")
        } catch {
            #expect(error.description.contains("root secret must be 32 bytes"), "\(error)")
        }
        // A member of the wrong kind, or null, says what is required.
        for (member, mention) in [("\"name\":7", "name: wrong type: a string is required"), ("\"name\":null", "name: null, where a string is required")] {
            let text = String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self)
            try Data(text.replacingOccurrences(of: #""name":"x""#, with: member).utf8).write(to: URL(fileURLWithPath: path))
            do {
                _ = try PhoneLinkStore.load(path: path)
                Issue.record("\(member) was accepted")
            } catch {
                #expect(error.description.contains(mention), "\(error)")
            }
            try Data(#"{"version":1,"rootSecret":"AQ","identityKey":"AQ","contactId":"AQ","name":"x","pairingIds":[],"revokedContactIds":[]}"#.utf8)
                .write(to: URL(fileURLWithPath: path))
        }
    }

    @Test("phone-link.json version 1 (a bare contact ID) is upgraded when read: same identity, a new listen token, no pairings; written once")
    func phoneIdentityUpgrade() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/" + PhoneLinkStore.fileName
        let old = PhoneLinkStore.Identity(name: "Old phone")
        let oldContactID = Array(repeating: UInt8(0xC1), count: 32)
        let version1 = """
            {"version":1,"rootSecret":"\(Base64URL.encode(old.rootSecret))","identityKey":"\(Base64URL.encode(old.identityKey))",\
            "contactId":"\(Base64URL.encode(oldContactID))","name":"Old phone","pairingIds":["AQIDBAUGBwg"],"revokedContactIds":[]}
            """
        try Data(version1.utf8).write(to: URL(fileURLWithPath: path))
        let upgraded = try PhoneLinkStore.load(path: path)
        #expect(upgraded.upgradedFromVersion == 1)
        let identity = try #require(upgraded.identity)
        #expect(identity.rootSecret == old.rootSecret && identity.identityKey == old.identityKey && identity.name == "Old phone")
        #expect(identity.contactID != oldContactID && identity.contactID == identity.listenToken.contactID)
        #expect(identity.pairingIDs.isEmpty, "pairings made under the old contact ID are not kept")
        let onDisk = try String(contentsOfFile: path, encoding: .utf8)
        #expect(onDisk.contains("\"version\" : 2") && onDisk.contains("\"listenToken\"") && !onDisk.contains("contactId"), "\(onDisk)")
        let again = try PhoneLinkStore.load(path: path)
        #expect(again.upgradedFromVersion == nil, "upgraded once")
        #expect(again.identity == identity, "the same token for every later reader")
        let mode = (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue
        #expect(mode == 0o600)
        // A listen token of the wrong size in a version-2 file is named.
        try Data(onDisk.replacingOccurrences(of: identity.listenToken.base64URL, with: "AQ").utf8).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try PhoneLinkStore.load(path: path)
        } throws: { "\($0)".contains("listenToken: a listen token is not 32 bytes of unpadded base64url") }
    }

    /// A walkthrough: a member a newer build wrote into one link was carried into the link that
    /// replaced it (the same phone linked again), since unknown members were found by name.
    @Test("links.json: a link's unknown members stay with it through rewrites, and a new link of that phone under its name does not inherit them")
    func unknownMembersFollowTheirLink() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/links.json"
        let key = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        let other = Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)
        func link(_ name: String, pairing: UInt8, key: [UInt8]) -> StoredLink {
            StoredLink(
                LinkingInfo(
                    contactID: [pairing], pairingID: Array(repeating: pairing, count: 8), linkSecret: Array(repeating: pairing, count: 32),
                    authenticatorPublicKey: key, name: name, handshakeSignature: Array(repeating: 0, count: 32)),
                tunnelDomain: 0, linkedAt: UInt64(pairing))
        }
        try LinkStore(path: path, links: [link("Pixel", pairing: 1, key: key), link("Tab", pairing: 2, key: other)]).save()
        func objects() throws -> [String: [String: Any]] {
            let file = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
            let links = file?["links"] as? [[String: Any]] ?? []
            return Dictionary(uniqueKeysWithValues: links.map { ($0["name"] as? String ?? "", $0) })
        }
        var edited = try objects()
        edited["Pixel"]?["futureFieldTiedToThisLink"] = "pixel"
        edited["Tab"]?["futureFieldTiedToThisLink"] = "tab"
        let document: [String: Any] = ["version": 1, "links": Array(edited.values)]
        try JSONSerialization.data(withJSONObject: document).write(to: URL(fileURLWithPath: path))
        // A rewrite for another change keeps each link's member.
        #expect(try LinkStore.upsert(link("Watch", pairing: 3, key: Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation)), path: path) == "Watch")
        #expect(try objects()["Pixel"]?["futureFieldTiedToThisLink"] as? String == "pixel")
        // The same phone linked again: a new record under the old name, without the old one's member.
        #expect(try LinkStore.upsert(link("Pixel", pairing: 4, key: key), path: path) == "Pixel")
        let after = try objects()
        #expect(after["Pixel"]?["pairingId"] as? String == Base64URL.encode(Array(repeating: 4, count: 8)))
        #expect(after["Pixel"]?["futureFieldTiedToThisLink"] == nil, "\(after)")
        #expect(after["Tab"]?["futureFieldTiedToThisLink"] as? String == "tab", "another link keeps its own")
    }

    /// A walkthrough: a newer version said "move it aside" (which destroys the identity), an empty
    /// file was "not a store document", a repeated member was taken silently, and `--unlink`
    /// dropped a newer build's member.
    @Test("phone-link.json is read as strictly as the stores: a newer version says to use the build that wrote it; empty, blank, a BOM or a repeated member is not JSON; unknown members survive a rewrite")
    func phoneIdentityStrict() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/" + PhoneLinkStore.fileName
        let identity = PhoneLinkStore.Identity()
        try PhoneLinkStore(path: path, identity: identity).save()
        let good = try String(contentsOfFile: path, encoding: .utf8)
        #expect(good.contains("\"version\" : 2"), "\(good)")
        func refusal(_ text: String) throws -> StoreError? {
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            do {
                _ = try PhoneLinkStore.load(path: path)
                return nil
            } catch {
                return error
            }
        }
        let newer = try refusal(good.replacingOccurrences(of: "\"version\" : 2", with: "\"version\" : 3"))
        #expect(newer?.code == .unsupportedVersion && newer?.reason == "version 3; this build reads versions 1 and 2", "\(String(describing: newer))")
        #expect(newer?.advice.contains("use the hybrid-sim that wrote it") == true)
        #expect(try refusal(good.replacingOccurrences(of: "\"version\" : 2", with: "\"version\" : 2.0"))?.code == .unsupportedVersion)
        for text in ["", "  \n", "\u{FEFF}" + good] {
            #expect(try refusal(text)?.code == .notJSON, "\(text.debugDescription)")
        }
        let token = identity.listenToken.base64URL
        let twice = good.replacingOccurrences(
            of: "\"listenToken\" : \"\(token)\"",
            with: "\"listenToken\" : \"\(String(repeating: "A", count: 43))\", \"listenToken\" : \"\(token)\"")
        #expect(twice != good)
        let repeated = try refusal(twice)
        #expect(repeated?.code == .notJSON && repeated?.reason.contains("listenToken") == true, "\(String(describing: repeated))")

        // A newer build's member survives a rewrite (--unlink, a new pairing ID).
        try Data(good.replacingOccurrences(of: "\"version\" : 2", with: "\"futureField\" : {\"a\" : [1]}, \"version\" : 2").utf8)
            .write(to: URL(fileURLWithPath: path))
        var loaded = try PhoneLinkStore.load(path: path)
        loaded.identity?.rotateContactID()
        try loaded.save()
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
        #expect((object?["futureField"] as? [String: Any])?["a"] as? [Int] == [1], "\(String(describing: object))")
        #expect(try PhoneLinkStore.load(path: path).identity == loaded.identity)
    }

    @Test("phone-link.json: two processes saving the same identity lose no pairing ID and no revocation")
    func phoneIdentityMerge() throws {
        let dir = try directory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/" + PhoneLinkStore.fileName
        try PhoneLinkStore(path: path, identity: PhoneLinkStore.Identity()).save()

        // Two phone processes load the same file, each links a desktop, each saves.
        var first = try #require(try PhoneLinkStore.load(path: path).identity)
        var second = first
        let a = first.newLink().pairingID
        let b = second.newLink().pairingID
        try PhoneLinkStore(path: path, identity: first).save()
        try PhoneLinkStore(path: path, identity: second).save()
        #expect(try PhoneLinkStore.load(path: path).identity?.pairingIDs == [a, b])

        // One unlinks while the other, loaded before, links again: the rotation stands.
        var unlinker = try #require(try PhoneLinkStore.load(path: path).identity)
        var late = unlinker
        let oldContact = unlinker.contactID
        unlinker.rotateContactID()
        _ = late.newLink()
        try PhoneLinkStore(path: path, identity: unlinker).save()
        try PhoneLinkStore(path: path, identity: late).save()
        let final = try #require(try PhoneLinkStore.load(path: path).identity)
        #expect(final.contactID == unlinker.contactID)
        #expect(final.revokedContactIDs == [oldContact])
        #expect(final.pairingIDs.isEmpty, "pairings of the revoked contact ID are gone")

        // A different identity created meanwhile is never overwritten.
        let stranger = PhoneLinkStore.Identity()
        #expect(throws: StoreError.self) { try PhoneLinkStore(path: path, identity: stranger).save() }
        #expect(try PhoneLinkStore.load(path: path).identity == final)
    }

    @Test("--unlink --json with no link identity: a note on stderr and an unlinked event with revoked 0, exit 0")
    func unlinkWithNothingToRevoke() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-unlink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let (status, captured) = await Self.unlink(in: directory)
        #expect(status == 0)
        #expect(captured.filter { $0.0 == "out" }.map(\.1) == [#"{"event":"unlinked","flow":"linked","revoked":0}"#])
        #expect(captured.contains { $0.0 == "err" && $0.1.hasSuffix("nothing to revoke") })
    }

    @Test("--unlink with an identity no desktop was ever linked to: the contact ID is rotated and the line says no desktop is affected; once linked, it says linked desktops get 410")
    func unlinkNeverLinked() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-unlink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent(PhoneLinkStore.fileName).path
        var identity = PhoneLinkStore.Identity()
        try PhoneLinkStore(path: path, identity: identity).save()
        let (status, lines) = await Self.unlink(in: directory)
        #expect(status == 0)
        #expect(lines.contains { $0.0 == "err" && $0.1.hasSuffix("no desktop had been linked to this phone, so none is affected") }, "\(lines)")
        identity = try #require(try PhoneLinkStore.load(path: path).identity)
        _ = identity.newLink()
        try PhoneLinkStore(path: path, identity: identity).save()
        let (_, linked) = await Self.unlink(in: directory)
        #expect(linked.contains { $0.0 == "err" && $0.1.hasSuffix("from then on every desktop linked to this phone gets 410") }, "\(linked)")
    }

    @Test("--unlink on a version-1 store: the note says the links made before end; the new contact ID, which no desktop holds, is not revoked")
    func unlinkUpgradesVersion1() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-unlink-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let old = PhoneLinkStore.Identity()
        let path = directory.appendingPathComponent(PhoneLinkStore.fileName).path
        try Data("""
            {"version":1,"rootSecret":"\(Base64URL.encode(old.rootSecret))","identityKey":"\(Base64URL.encode(old.identityKey))",\
            "contactId":"AQID","name":"x","pairingIds":[],"revokedContactIds":["BAUG"]}
            """.utf8).write(to: URL(fileURLWithPath: path))
        let (status, lines) = await Self.unlink(in: directory)
        #expect(status == 0)
        let errors = lines.filter { $0.0 == "err" }.map(\.1)
        #expect(errors.first == "note: \(path) was version 1, whose contact ID any linked desktop could listen on; it now has "
            + "a secret listen token and a new contact ID, so desktops linked before must link again (by QR code): "
            + "the relay answers them 410, or 504 if it saw this phone listen under the old contact ID", "\(errors)")
        #expect(errors.last == "nothing more to revoke: the links made under the old contact ID have ended with it")
        #expect(lines.filter { $0.0 == "out" }.map(\.1) == [#"{"event":"unlinked","flow":"linked","revoked":0}"#])
        let identity = try #require(try PhoneLinkStore.load(path: path).identity)
        #expect(identity.revokedTokens.isEmpty, "version 1's revoked IDs had no token to keep, and the new token stays")
        #expect(identity.rootSecret == old.rootSecret)
        // A second --unlink, on the version-2 store, revokes as usual.
        let (again, second) = await Self.unlink(in: directory)
        #expect(again == 0)
        #expect(second.filter { $0.0 == "out" }.map(\.1) == [#"{"event":"unlinked","flow":"linked","revoked":1}"#])
        #expect(try PhoneLinkStore.load(path: path).identity?.revokedTokens == [identity.listenToken])
    }

    /// Runs `phone --unlink --json` on the stores in `directory`: its status and both streams' lines.
    private static func unlink(in directory: URL) async -> (Int32, [(String, String)]) {
        var phone = PhoneConfiguration(qr: .url(""))
        phone.storePath = directory.appendingPathComponent("passkeys.json").path
        phone.json = true
        let lines = LockedLines()
        let output = ProgramOutput(
            standardOutput: { lines.append("out", $0) }, standardError: { lines.append("err", $0) })
        let status = await PhoneListenProgram.unlink(phone, output: output)
        return (status, lines.all)
    }
}

/// Lines from both streams in the order they came.
private final class LockedLines: Sendable {
    private let lines = Mutex<[(String, String)]>([])
    func append(_ stream: String, _ line: String) { lines.withLock { $0.append((stream, line)) } }
    var all: [(String, String)] { lines.withLock { $0 } }
}
