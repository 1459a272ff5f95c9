import CTAP2
import Foundation
import HybridCore
@testable import HybridSim
import Testing

/// The phone writes its store only once the driver granted its answer's claim (the claim is made
/// under the store lock, before the write): a claim refused (the deadline passed while the phone
/// did not run) writes nothing and answers nothing the desktop could use.
@Suite("Phone: the store is written only with a granted claim")
struct PhoneAnswerClaimTests {
    @Test("a sign-in whose claim is refused writes nothing and fails as late; granted, it signs and counts")
    func claimDecidesTheWrite() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-claim-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let storePath = home + "/passkeys.json"
        try PasskeyStore(path: storePath, passkeys: try StoreSamples.passkeys(count: 1)).save()
        var configuration = PhoneConfiguration(qr: .url("FIDO:/0"))
        configuration.environment = ["HYBRID_SIM_HOME": home]
        let narrator = PhoneNarrator(output: ProgramOutput(standardOutput: { _ in }, standardError: { _ in }), json: false,
                                     relayURL: "", proximityURL: "", rssi: 0)
        let request = Ceremony.Authentication(
            relyingParty: RelyingParty(id: "example.com", origin: "https://example.com"), challenge: Array(repeating: 5, count: 32))

        let refused = PhoneAuthenticator(store: try PasskeyStore.load(path: storePath), configuration: configuration, narrator: narrator)
        let late = await refused.respond(request.requestBytes, claim: { false })
        #expect(late == [CTAP2StatusCode.other.rawValue])
        #expect(await refused.failure?.message == "the answer came after the user-action deadline; nothing was saved or sent")
        #expect(try PasskeyStore.load(path: storePath).passkeys.map(\.signCount) == [0], "nothing was written")

        let granted = PhoneAuthenticator(store: try PasskeyStore.load(path: storePath), configuration: configuration, narrator: narrator)
        let answer = await granted.respond(request.requestBytes, claim: { true })
        #expect(answer.first == CTAP2StatusCode.ok.rawValue)
        #expect(try PasskeyStore.load(path: storePath).passkeys.map(\.signCount) == [1])
    }

    @Test(
        "--account: of a name in NFC and NFD made in the same second, the form written exactly as --account signs, though made first",
        arguments: [
            ("Zo\u{EB}", [1, 0]),  // NFC, exactly the first passkey's name: it signs, though made first
            ("Zoe\u{308}", [0, 1]),  // NFD, exactly the second's
        ])
    func accountChoosesTheExactFormThenTheLaterMade(account: String, signCounts: [UInt32]) async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("hybridsim-tie-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: home) }
        let storePath = home + "/passkeys.json"
        var passkeys = try StoreSamples.passkeys(count: 3)
        passkeys[0].userName = "Zo\u{EB}"  // NFC
        passkeys[1].userName = "Zoe\u{308}"  // NFD, made second
        passkeys[1].createdAt = passkeys[0].createdAt
        passkeys[2].userName = "Bo"
        passkeys[2].userDisplayName = "Zo\u{EB}"  // another RP's: never a candidate
        passkeys[2].rpID = "other.example"
        try PasskeyStore(path: storePath, passkeys: passkeys).save()
        var configuration = PhoneConfiguration(qr: .url("FIDO:/0"))
        configuration.environment = ["HYBRID_SIM_HOME": home]
        configuration.account = account
        let narrator = PhoneNarrator(output: ProgramOutput(standardOutput: { _ in }, standardError: { _ in }), json: false,
                                     relayURL: "", proximityURL: "", rssi: 0)
        let request = Ceremony.Authentication(
            relyingParty: RelyingParty(id: passkeys[0].rpID, origin: "https://\(passkeys[0].rpID)"), challenge: Array(repeating: 6, count: 32))
        let phone = PhoneAuthenticator(store: try PasskeyStore.load(path: storePath), configuration: configuration, narrator: narrator)
        let answer = await phone.respond(request.requestBytes, claim: { true })
        #expect(answer.first == CTAP2StatusCode.ok.rawValue)
        #expect(try PasskeyStore.load(path: storePath).passkeys.map(\.signCount) == signCounts + [0])
    }

    @Test("a name given in the other normalization form than the only passkey's still finds it (Swift compares canonically)")
    func otherFormFindsTheOnlyOne() throws {
        var passkeys = try StoreSamples.passkeys(count: 2)
        passkeys[0].userName = "Zo\u{EB}"
        passkeys[1].userName = "Zoey"
        #expect(PhoneAuthenticator.named("Zoe\u{308}", among: passkeys).map(\.userName) == ["Zo\u{EB}"])
        passkeys[1].userDisplayName = "Zoe\u{308}"
        #expect(PhoneAuthenticator.named("Zoe\u{308}", among: passkeys).map(\.userName) == ["Zoey"], "an exact display name comes first")
    }
}
