import CTAP2
import HybridCore
import Testing

/// `HybridError` through `CodedError` (equality by code, which every `#expect(throws:)` in these tests
/// relies on) and
/// the wire constants of `HybridConstants`.
@Suite struct HybridErrorTests {
    @Test func equalityIsByCode() {
        #expect(HybridError(.decryptionFailed, "message 3 does not authenticate") == HybridError(.decryptionFailed))
        #expect(HybridError(.decryptionFailed).reason.isEmpty)
        #expect(HybridError(.decryptionFailed, "a") != HybridError(.invalidPadding, "a"))
        #expect(Set([HybridError(.invalidFrame, "x"), HybridError(.invalidFrame, "y")]).count == 1)
    }

    @Test func descriptionNamesCodeAndReason() {
        #expect(HybridError(.invalidQRCode, "key 1 missing").description == "invalidQRCode: key 1 missing")
    }

    @Test("codes have distinct names; a code-only error describes itself by its code")
    func codes() {
        #expect(Set(HybridError.Code.allCases.map(\.rawValue)).count == HybridError.Code.allCases.count)
        #expect(HybridError(.invalidFrame).description == "invalidFrame")
    }

    @Test("every error type compares and hashes by code only, and RuntimeError is Equatable too")
    func everyTypeByCode() {
        #expect(CTAP2Error(.invalidValue, "a") == CTAP2Error(.invalidValue, "b", cborError: CBORError(.truncated)))
        #expect(CBORError(.truncated, offset: 3) == CBORError(.truncated, offset: 9))
        #expect(CBORError(.truncated, offset: 3) != CBORError(.malformed, offset: 3))
        #expect(RelyingPartyError(.originMismatch, "x") == RelyingPartyError(.originMismatch))
        #expect(Set([Ceremony.Failure(.refused, status: .operationDenied, reason: "a"),
                     Ceremony.Failure(.refused, status: .noCredentials, reason: "b")]).count == 1)
        #expect(Ceremony.Failure(.refused) != Ceremony.Failure(.malformedResponse))
    }

    /// Values from Chromium `v2_constants.h` and PROTOCOL.md; they must never change.
    @Test func wireConstants() {
        #expect(HybridConstants.qrSecretSize == 16)
        #expect(HybridConstants.compressedPublicKeySize == 33)
        #expect(HybridConstants.uncompressedPublicKeySize == 65)
        #expect(HybridConstants.eidKeySize == 64)
        #expect(HybridConstants.eidSize == 16)
        #expect(HybridConstants.advertSize == 20)
        #expect(HybridConstants.nonceSize == 10)
        #expect(HybridConstants.routingIDSize == 3)
        #expect(HybridConstants.tunnelIDSize == 16)
        #expect(HybridConstants.pskSize == 32)
        #expect(HybridConstants.handshakeMessageSize == 81)
        #expect(HybridConstants.paddingGranularity == 32)
        #expect(HybridConstants.maxSequence == (1 << 24) - 1)
        #expect(HybridConstants.updateMessagePaddingTarget == 512)
        #expect(HybridConstants.pairingIDSize == 8)
        #expect(HybridConstants.qrPrefix == "FIDO:/")
        #expect(HybridConstants.fidoServiceUUID == 0xFFF9)
        #expect(HybridConstants.googleServiceUUID == 0xFDE2)
    }
}
