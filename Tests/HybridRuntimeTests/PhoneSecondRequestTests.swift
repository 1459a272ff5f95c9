import CTAP2
import HybridCore
@testable import HybridRuntime
import Synchronization
import Testing

/// A desktop that sends another request after the phone answered its getAssertion. Phones answer
/// one makeCredential or getAssertion per transaction (Chromium's phone ends the transaction with
/// that response); HybridSim's phone used to answer the next one too, creating a second passkey for
/// a repeated makeCredential, so a client that retried by mistake passed here and failed on a phone.
@Suite("Phone: a request after the transaction's response is refused", .timeLimit(.minutes(1)))
struct PhoneSecondRequestTests {
    enum First: String, CaseIterable, Sendable { case makeCredential, getAssertion }

    @Test(
        "after the makeCredential or getAssertion is answered, the same request again or a getInfo ends the transaction with an error naming both; the responder runs once more only for a getInfo sent before",
        arguments: First.allCases, [[UInt8(0x01)], [UInt8(0x02)], [UInt8(0x04)]])
    func requestAfterResponse(_ first: First, _ second: [UInt8]) async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let answers = Mutex<[UInt8]>([])
        var desktop = try await HandDrivenDesktop.start(
            requestType: first == .getAssertion ? .getAssertion : .makeCredential, getInfo: phone.getInfo
        ) { request in
            answers.withLock { $0.append(request.first ?? 0) }
            return phone.respond(to: request, now: unixNow())
        }
        func exchange(_ request: [UInt8]) async throws -> [UInt8] { try await desktop.exchange(request) }
        // A getInfo before the transaction's request is answered and the transaction goes on.
        #expect(try await exchange([0x04]).first == CTAP2StatusCode.ok.rawValue)
        let user = PublicKeyCredentialUserEntity(id: [9, 9], name: "zoe", displayName: "Zoe")
        let registration = Ceremony.Registration(relyingParty: exampleRP, rpName: "Example", user: user, challenge: RandomSource.system.bytes(32))
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        let request = first == .makeCredential ? registration.requestBytes : authentication.requestBytes
        #expect(try await exchange(request).first == CTAP2StatusCode.ok.rawValue)
        let passkeys = phone.passkeys.count
        let again = second == [0x01] ? registration.requestBytes : second == [0x02] ? authentication.requestBytes : second
        try await desktop.tunnel.send(try desktop.session.encryptRequest(again))

        let result = await desktop.phone.result
        guard case .failure(let error as TransactionError) = result else {
            Issue.record("the phone answered a second request: \(result)")
            return
        }
        #expect(answers.withLock { $0 } == [0x04, request[0]], "the responder ran again")
        #expect(phone.passkeys.count == passkeys, "a second passkey was made")
        #expect(error.side == .phone && error.step == "waiting for the desktop to end the transaction")
        let underlying = try #require(error.underlying as? HybridError, "\(error)")
        #expect(underlying.code == .unexpectedMessage)
        let names: [UInt8: String] = [0x01: "authenticatorMakeCredential", 0x02: "authenticatorGetAssertion", 0x04: "authenticatorGetInfo"]
        #expect(
            underlying.reason == "the desktop sent another request (\(names[second[0]]!)) after the response to its \(names[first == .makeCredential ? 0x01 : 0x02]!): "
                + "a phone answers one makeCredential or getAssertion per transaction; send each in a transaction of its own",
            "\(underlying.reason)")
        #expect(desktop.tunnel.receiveIfReady() == nil, "the phone sent something after its response")
    }
}
