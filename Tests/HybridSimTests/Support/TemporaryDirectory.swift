import CTAP2
import Foundation
import HybridCore

/// A fresh directory under the system temporary directory, removed by ``remove()``.
struct TemporaryDirectory {
    let path: String

    init() throws {
        path =
            FileManager.default.temporaryDirectory
            .appendingPathComponent("hybridsim-store-tests-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// The POSIX permission bits of a file.
    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    /// The names in the directory.
    func contents() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }
}

/// Passkeys made by the real authenticator.
enum StoreSamples {
    static func passkeys(count: Int, seed: String = "store") throws -> [Passkey] {
        var fixture = CeremonyFixture(seed: seed)
        for index in 0..<count {
            let user = PublicKeyCredentialUserEntityFixture.user(index)
            _ = try fixture.register(user: user)
        }
        return fixture.authenticator.passkeys
    }

    static func credentials(count: Int, seed: String = "rp-store") throws -> [RegisteredCredential] {
        var fixture = CeremonyFixture(seed: seed)
        var out: [RegisteredCredential] = []
        for index in 0..<count {
            let user = PublicKeyCredentialUserEntityFixture.user(index)
            let registration = try fixture.register(attestation: index % 2 == 0 ? .none : .packedSelf, user: user)
            out.append(
                try CeremonyFixture.relyingParty().verifyRegistration(
                    response: registration.response, clientDataJSON: registration.clientDataJSON,
                    expectedChallenge: registration.challenge, user: user, now: CeremonyFixture.now + UInt64(index)))
        }
        return out
    }
}

enum PublicKeyCredentialUserEntityFixture {
    static func user(_ index: Int) -> PublicKeyCredentialUserEntity {
        PublicKeyCredentialUserEntity(
            id: Array("user-\(index)".utf8), name: "user\(index)", displayName: "User \(index)")
    }
}
