import CTAP2
import Foundation
import HybridCore
import HybridSim
import Testing

/// Two `hybrid-sim phone` processes on one passkey store (and their two desktops on one
/// relying-party store), running ceremonies at the same time: nothing is lost and every counter
/// a phone hands out is new.
@Suite("End to end: two phones on one store (processes)", .serialized)
struct EndToEndSharedStoreTests {
    /// One phone and its desktop: a lab of their own (its child processes), the stores of `shared`.
    /// Each lane is used by one task at a time.
    private final class Lane: @unchecked Sendable {
        let lab: EndToEndLab
        let passkeyStore: String
        let relyingPartyStore: String

        init(sharing shared: EndToEndLab) throws {
            lab = try EndToEndLab()
            passkeyStore = shared.passkeyStore
            relyingPartyStore = shared.relyingPartyStore
        }
    }

    /// One ceremony: a desktop (embedded relay) and a phone with `--json`; both must exit 0.
    /// Returns the phone's result event.
    private static func ceremony(
        _ lane: Lane, desktop arguments: [String], phone phoneArguments: [String]
    ) async throws -> [String: String] {
        let lab = lane.lab
        let desktop = try await lab.startDesktop(arguments + ["--rp-store", lane.relyingPartyStore, "--timeout", "30"])
        let phone = try lab.startPhone(
            for: desktop,
            ["--qr", desktop.url, "--json", "--timeout", "30", "--store", lane.passkeyStore] + phoneArguments)
        let desktopStatus = try await desktop.process.waitForExit(timeout: .seconds(45))
        let phoneStatus = try await phone.waitForExit(timeout: .seconds(45))
        guard desktopStatus == 0, phoneStatus == 0 else {
            throw ChildProcessError("ceremony failed:\n\(desktop.process.transcript)\n\(phone.transcript)")
        }
        let result = try #require(try JSONEvents.all(phone).last { $0["event"] as? String == "result" })
        return result.compactMapValues { value in (value as? String) ?? (value as? Int).map(String.init) }
    }

    @Test("50 rounds of two phones registering and signing in at once: no passkey lost, counters strictly increasing")
    func twoPhonesFiftyRounds() async throws {
        let lab = try EndToEndLab()
        let lanes = (try Lane(sharing: lab), try Lane(sharing: lab))
        defer {
            lanes.0.lab.tearDown()
            lanes.1.lab.tearDown()
            lab.tearDown()
        }
        _ = try await Self.ceremony(lanes.0, desktop: ["--request", "mc", "--user", "shared"], phone: [])

        var registered: Set<String> = []
        var counts: [Int] = []
        let rounds = 50
        for round in 0..<rounds {
            if round % 2 == 0 {
                // Both phones register a new account at the same time.
                async let first = Self.ceremony(lanes.0, desktop: ["--request", "mc", "--user", "a\(round)"], phone: [])
                async let second = Self.ceremony(lanes.1, desktop: ["--request", "mc", "--user", "b\(round)"], phone: [])
                for result in try await [first, second] {
                    registered.insert(try #require(result["credentialId"]))
                }
            } else {
                // Both phones sign in with the same passkey at the same time.
                async let first = Self.ceremony(lanes.0, desktop: ["--request", "ga"], phone: ["--account", "shared"])
                async let second = Self.ceremony(lanes.1, desktop: ["--request", "ga"], phone: ["--account", "shared"])
                for result in try await [first, second] {
                    counts.append(try #require(result["signCount"].flatMap { Int($0) }))
                }
            }
        }

        // Every registration is in both stores, with its private key.
        let passkeys = try PasskeyStore.load(path: lab.passkeyStore)
        let credentials = try RelyingPartyStore.load(path: lab.relyingPartyStore)
        let stored = Set(passkeys.passkeys.map { Base64URL.encode($0.credentialID) })
        #expect(registered.count == rounds)
        #expect(registered.isSubset(of: stored), "lost: \(registered.subtracting(stored))")
        #expect(passkeys.passkeys.count == rounds + 1)
        #expect(passkeys.passkeys.allSatisfy { $0.privateKey.count == 32 })
        #expect(Set(credentials.credentials.map { Base64URL.encode($0.credentialId) }) == stored)

        // Every sign-in got a counter no other sign-in got: 1…50, each once.
        #expect(counts.sorted() == Array(1...rounds), "\(counts)")
        let shared = try #require(passkeys.passkeys.first { $0.userName == "shared" })
        #expect(shared.signCount == UInt32(rounds))
        #expect(credentials.credential(id: shared.credentialID)?.signCount == UInt32(rounds))
    }
}
