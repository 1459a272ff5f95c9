import CTAP2
import Foundation
import HybridCore
import HybridSim

/// The JSON store files (`passkeys.json`, `rp-credentials.json`), read from a real file as the
/// programs read them.
enum StoreTargets {
    static let all = [passkeyStore, relyingPartyStore]

    /// A private scratch directory for this process (one file per store kind, rewritten per input),
    /// removed when it exits (``FuzzScratch``).
    static let directory = FuzzScratch.subdirectory("stores")

    static func write(_ input: [UInt8], _ name: String) -> String {
        let path = directory + "/" + name
        // The targets read the input back from this file: one not written would test "missing file".
        guard FileManager.default.createFile(atPath: path, contents: Data(input)) else {
            fatalError("the fuzz harness cannot write its input to \(path)")
        }
        return path
    }

    /// What a save of `entries` writes, read back from disk (the seeds).
    static func saved(_ save: (String) throws -> Void, _ name: String) -> [UInt8] {
        let path = directory + "/seed-" + name
        try? FileManager.default.removeItem(atPath: path)
        try! save(path)
        defer { try? FileManager.default.removeItem(atPath: path) }
        return Array(FileManager.default.contents(atPath: path) ?? Data())
    }

    static let passkey = Passkey(
        credentialID: Array(repeating: 0xC1, count: 16), rpID: "example.com", rpName: "Example", userID: [1, 2, 3],
        userName: "alice", userDisplayName: "Alice", privateKey: Array(repeating: 0x01, count: 32), signCount: 3,
        createdAt: 1_760_000_000)

    /// `PasskeyStore.load(path:)`: an accepted file loads the same way twice, with unique IDs.
    static let passkeyStore = FuzzTarget(
        "passkey-store", "PasskeyStore.load(path:) (passkeys.json); loads deterministically with unique credential IDs",
        seeds: { [saved({ try PasskeyStore(path: $0, passkeys: [passkey]).save() }, PasskeyStore.fileName)] }
    ) { input in
        let path = write(input, PasskeyStore.fileName)
        guard let store = try? PasskeyStore.load(path: path) else { return .rejected }
        let again = try? PasskeyStore.load(path: path)
        return FuzzTarget.check(
            again?.passkeys == store.passkeys && Set(store.passkeys.map(\.credentialID)).count == store.passkeys.count,
            "passkeys.json \(input.fuzzHex) loads inconsistently")
    }

    static let credential = RegisteredCredential(
        credentialId: Array(repeating: 0xC2, count: 16),
        publicKey: try! COSEKey(x963Representation: Array(FuzzKeys.identity.publicKey.x963Representation)).encode(), signCount: 1,
        userId: [9, 9], userName: "alice", rpId: "example.com", createdAt: 1_760_000_000, attestationFormat: "none",
        backupEligible: false, backupState: false)

    /// `RelyingPartyStore.load(path:)`: the same invariant for the relying party's credentials.
    static let relyingPartyStore = FuzzTarget(
        "rp-store", "RelyingPartyStore.load(path:) (rp-credentials.json); loads deterministically with unique credential IDs",
        seeds: { [saved({ try RelyingPartyStore(path: $0, credentials: [credential]).save() }, RelyingPartyStore.fileName)] }
    ) { input in
        let path = write(input, RelyingPartyStore.fileName)
        guard let store = try? RelyingPartyStore.load(path: path) else { return .rejected }
        let again = try? RelyingPartyStore.load(path: path)
        return FuzzTarget.check(
            again?.credentials == store.credentials && Set(store.credentials.map(\.credentialId)).count == store.credentials.count,
            "rp-credentials.json \(input.fuzzHex) loads inconsistently")
    }
}
