import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

@Suite("Relying-party store (desktop)")
struct RelyingPartyStoreTests {
    @Test("save then load round-trips with mode 0600; lookups by ID, RP, user")
    func roundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        #expect(try RelyingPartyStore.load(path: path).credentials.isEmpty)

        let samples = try StoreSamples.credentials(count: 3)
        var store = RelyingPartyStore(path: path, credentials: samples)
        var foreign = samples[0]
        foreign.credentialId = [0xF0, 0x0D]
        foreign.rpId = "other.example"
        store.upsert(foreign)
        try store.save()
        #expect(try TemporaryDirectory.mode(path) == 0o600)

        let loaded = try RelyingPartyStore.load(path: path)
        #expect(loaded.credentials == store.credentials)
        #expect(loaded.credential(id: samples[2].credentialId) == samples[2])
        #expect(loaded.credential(id: [1, 2, 3]) == nil)
        #expect(loaded.credentials(rpId: CeremonyFixture.rpId).count == 3)
        #expect(loaded.credentials(rpId: "other.example") == [foreign])
        #expect(loaded.credentials(rpId: CeremonyFixture.rpId, userId: Array("user-1".utf8)) == [samples[1]])
        #expect(loaded.credentials(rpId: CeremonyFixture.rpId, userName: "user2") == [samples[2]])
        #expect(loaded.credentials.map(\.attestationFormat) == ["none", "packed", "none", "none"])

        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        #expect(object["version"] as? Int == 1)
        let first = try #require((object["credentials"] as? [[String: Any]])?.first)
        #expect(
            Set(first.keys) == [
                "credentialId", "publicKey", "signCount", "userId", "userName", "rpId", "createdAt",
                "attestationFormat",
                "backupEligible", "backupState",
            ])
        #expect(first["publicKey"] as? String == Base64URL.encode(samples[0].publicKey))
    }

    @Test("the desktop's flow: register, store, sign in with the stored key, store the new counter")
    func desktopFlow() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        var fixture = CeremonyFixture()
        let rp = CeremonyFixture.relyingParty(requireUserVerification: true)

        var store = try RelyingPartyStore.load(path: path)
        let registration = try fixture.register(attestation: .packedSelf)
        store.upsert(
            try rp.verifyRegistration(
                response: registration.response, clientDataJSON: registration.clientDataJSON,
                expectedChallenge: registration.challenge, user: CeremonyFixture.user,
                registeredCredentialIds: Set(store.credentials.map(\.credentialId)), now: CeremonyFixture.now))
        try store.save()

        for expectedCount: UInt32 in 1...3 {
            var current = try RelyingPartyStore.load(path: path)
            let assertion = try fixture.authenticate()
            let updated = try rp.verifyAuthentication(
                response: assertion.response, clientDataJSON: assertion.clientDataJSON,
                expectedChallenge: assertion.challenge, knownCredentials: current.credentials)
            #expect(updated.signCount == expectedCount)
            current.upsert(updated)
            try current.save()
        }
        #expect(try RelyingPartyStore.load(path: path).credentials.map(\.signCount) == [3])
    }

    @Test("remove and upsert")
    func editing() throws {
        let samples = try StoreSamples.credentials(count: 2)
        var store = RelyingPartyStore(path: "/nonexistent/rp.json", credentials: samples)
        var bumped = samples[1]
        bumped.signCount = 9
        store.upsert(bumped)
        #expect(store.credentials.map(\.signCount) == [0, 9])
        #expect(store.remove(id: samples[0].credentialId) == samples[0])
        #expect(store.remove(id: samples[0].credentialId) == nil)
        #expect(store.credentials == [bumped])
    }

    @Test("a corrupted file gives a specific error and is left byte for byte", arguments: CorruptStore.credentialCases)
    func corrupted(_ corrupt: CorruptStore) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        let good = try JSONEncoder().encode(try StoreSamples.credentials(count: 2))
        let bytes = corrupt.bytes(String(decoding: good, as: UTF8.self), key: "credentials")
        try Data(bytes).write(to: URL(fileURLWithPath: path))

        do {
            _ = try RelyingPartyStore.load(path: path)
            Issue.record("\(corrupt.name): loaded")
        } catch {
            #expect(error == corrupt.expected, "\(corrupt.name): \(error)")
            #expect(error.description.hasPrefix(path + ": "))
            #expect(error.description.contains(corrupt.mention), "\(corrupt.name): \(error.description)")
        }
        #expect(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == bytes)
        #expect(try directory.contents() == ["rp-credentials.json"])
    }

    @Test("a crash mid-save leaves the previous store intact", arguments: SimulatedCrash.allCases)
    func crash(_ point: SimulatedCrash) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.file("rp-credentials.json")
        let samples = try StoreSamples.credentials(count: 2)
        try RelyingPartyStore(path: path, credentials: [samples[0]]).save()
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(throws: StoreError(.writeFailed)) {
            try RelyingPartyStore(path: path, credentials: samples).save(simulatingCrash: point)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(try RelyingPartyStore.load(path: path).credentials == [samples[0]])
    }

    @Test("RegisteredCredential JSON rejects a key that is not ES256")
    func credentialDecoding() throws {
        let sample = try StoreSamples.credentials(count: 1)[0]
        let encoded = try JSONEncoder().encode(sample)
        #expect(try JSONDecoder().decode(RegisteredCredential.self, from: encoded) == sample)

        var object = try #require(try JSONSerialization.jsonObject(with: encoded) as? [String: Any])
        let okp: CBORValue = [1: 1, 3: -8, -1: 6, -2: .bytes([UInt8](repeating: 1, count: 32))]
        object["publicKey"] = Base64URL.encode(CBOR.encode(okp))
        let tampered = try JSONSerialization.data(withJSONObject: object)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(RegisteredCredential.self, from: tampered) }
    }
}
