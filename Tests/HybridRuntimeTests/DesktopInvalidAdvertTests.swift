import CTAP2
import Foundation
import HybridCore
@testable import HybridRuntime
import Testing

/// The desktop driver over transports that are not a scanner (the in-memory ones): an advert that
/// authenticates under the QR key but breaks a plaintext rule is skipped, as Chromium's
/// `eid::Decrypt` skips it, and the phone's valid advert after it is used.
@Suite("Desktop driver: an invalid advert for this session is skipped", .timeLimit(.minutes(1)))
struct DesktopInvalidAdvertTests {
    @Test("a reserved-byte advert, then the phone's own: the sign-in goes through")
    func invalidThenValid() async throws {
        let account = Account.make("erin")
        let phone = SimulatedPhone(passkeys: [account.passkey])
        let (phoneEnd, desktopEnd) = InMemoryTunnel.pair()
        let adverts = AdvertMailbox()
        let session = ClientSession(requestType: .getAssertion, timestamp: unixNow())
        let phoneSession = try AuthenticatorSession(qr: QRPayload(url: session.url), getInfo: phone.getInfo)
        // Made with this QR code's key, so its tag is valid; its reserved byte is not zero.
        let cipher = AdvertCipher(eidKey: session.keys.eidKey)
        adverts.post(cipher.encrypt(plaintext: [0x01] + [UInt8](repeating: 0x44, count: 10) + [1, 2, 3, 0, 0]))

        let phoneTransports = AuthenticatorDriver.Transports(
            createTunnel: { _, _ in (phoneEnd, [1, 2, 3]) },
            advertise: { advert in
                adverts.post(advert)
                return NoAdvertisement()
            })
        let desktopTransports = ClientDriver.Transports(
            nextAdvert: { timeout in (try await adverts.next(timeout: timeout), -45, 0) },
            connect: { _, _, _ in desktopEnd })
        let authentication = Ceremony.Authentication(relyingParty: exampleRP, challenge: RandomSource.system.bytes(32))
        async let phoneRun: Void = AuthenticatorDriver.run(
            session: phoneSession, transports: phoneTransports, timeouts: .fast
        ) { request in phone.respond(to: request, now: unixNow()) }
        let outcome = try await ClientDriver.run(
            session: session, request: authentication.requestBytes, transports: desktopTransports, timeouts: .fast)
        try await phoneRun
        let (signedIn, _) = try authentication.verify(response: outcome.response, knownCredentials: [account.credential])
        #expect(signedIn.signCount == 1)
    }
}
