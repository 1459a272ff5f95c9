import HybridCore
import HybridRuntime
import Testing

/// Accessors a protocol tester reaches for from another package (found by a walkthrough of
/// Docs/HARNESS.md written as such a package).
@Suite("Library accessors: the QR session's advert key, a transaction error's close code and status")
struct LibraryAccessorsTests {
    @Test("a scanner built from ClientSession.eidKey matches the phone's advert for that session, and not another session's")
    func qrSessionEIDKey() throws {
        let desktop = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000)
        var phone = try AuthenticatorSession(qr: QRPayload(url: desktop.url), getInfo: [0xA0])
        let advert = try phone.tunnelCreated(routingID: [1, 2, 3])
        let matcher = ClientDriver.Transports.advertMatcher(eidKey: desktop.eidKey)
        guard case .matched(let matched) = matcher(advert) else {
            Issue.record("the session's own advert did not match")
            return
        }
        #expect(matched == advert)
        let other = ClientSession(requestType: .getAssertion, timestamp: 1_700_000_000)
        guard case .notOurs = ClientDriver.Transports.advertMatcher(eidKey: other.eidKey)(advert) else {
            Issue.record("another session's key matched this advert")
            return
        }
    }

    @Test("TransactionError exposes the close code and HTTP status of the runtime error underneath, nil otherwise")
    func transactionErrorShortcuts() {
        let closed = TransactionError(side: .phone, step: "waiting", underlying: RuntimeError.closed(.policyViolation, "phone refused"))
        #expect(closed.closeCode == .policyViolation && closed.httpStatus == nil)
        let gone = TransactionError(
            side: .desktop, step: "contacting", underlying: RuntimeError(.upgradeRejected, "relay rejected", httpStatus: 410))
        #expect(gone.httpStatus == 410 && gone.closeCode == nil)
        let other = TransactionError(side: .desktop, step: "x", underlying: HybridError(.handshakeFailed, "no"))
        #expect(other.closeCode == nil && other.httpStatus == nil)
    }
}
