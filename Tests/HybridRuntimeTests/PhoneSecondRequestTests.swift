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
    @Test(
        "after the getAssertion is answered, another getAssertion or a getInfo ends the transaction with an error naming both; the responder runs once",
        arguments: [[UInt8(0x02)], [UInt8(0x04)]])
    func requestAfterResponse(_ second: [UInt8]) async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let (desktopEnd, phoneEnd) = InMemoryTunnel.pair()
        var desktop = ClientSession(requestType: .getAssertion, timestamp: unixNow())
        var phoneSession = try AuthenticatorSession(qr: QRPayload(url: desktop.url), getInfo: phone.getInfo)
        guard case .matched = desktop.receivedAdvert(try phoneSession.tunnelCreated(routingID: [1, 2, 3])) else {
            Issue.record("the desktop did not match the phone's advert")
            return
        }
        try await desktopEnd.send(desktop.tunnelConnected())

        let answers = Mutex(0)
        let session = phoneSession
        let phoneRun = Task {
            var session = session
            try await AuthenticatorDriver.converse(
                session: &session, tunnel: phoneEnd, advertisement: nil, timeouts: .fast,
                transaction: TransactionDeadline(.seconds(30)), events: { _ in }
            ) { request in
                answers.withLock { $0 += 1 }
                return phone.respond(to: request, now: unixNow())
            }
        }

        var ready = false
        while !ready {
            for action in try desktop.receivedMessage(try await desktopEnd.receive(timeout: .seconds(5))) {
                if case .ready = action { ready = true }
            }
        }
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        try await desktopEnd.send(try desktop.encryptRequest(authentication.requestBytes))
        var response: [UInt8]? = nil
        while response == nil {
            for action in try desktop.receivedMessage(try await desktopEnd.receive(timeout: .seconds(5))) {
                if case .response(let bytes) = action { response = bytes }
            }
        }
        #expect(response?.first == CTAP2StatusCode.ok.rawValue)
        let request = second == [0x02] ? authentication.requestBytes : second
        try await desktopEnd.send(try desktop.encryptRequest(request))

        let result = await phoneRun.result
        guard case .failure(let error as TransactionError) = result else {
            Issue.record("the phone answered a second request: \(result)")
            return
        }
        #expect(answers.withLock { $0 } == 1, "the responder ran again")
        #expect(error.side == .phone && error.step == "waiting for the desktop to end the transaction")
        let underlying = try #require(error.underlying as? HybridError, "\(error)")
        #expect(underlying.code == .unexpectedMessage)
        let named = second == [0x02] ? "command 0x02 (getAssertion)" : "command 0x04"
        #expect(
            underlying.reason == "the desktop sent another request (\(named)) after the response to its getAssertion: "
                + "a phone answers one makeCredential or getAssertion per transaction; send each in a transaction of its own",
            "\(underlying.reason)")
        #expect(desktopEnd.receiveIfReady() == nil, "the phone sent something after its response")
    }
}
