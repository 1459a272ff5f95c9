import CTAP2
import HybridTestSupport
import Testing

/// authenticatorGetInfo responses captured from Android/Chrome and iOS 16 phones, and the transcript's.
@Suite("AuthenticatorGetInfoResponse")
struct GetInfoTests {
    @Test("decodes the captured responses", arguments: ["android_chrome_getinfo", "ios16_getinfo", "transcript_getinfo"])
    func captured(_ name: String) throws {
        let vector = try CTAP2Case.named(name)
        let info = try AuthenticatorGetInfoResponse(bytes: vector.bytes)
        #expect(info.versions == vector.list("versions"))
        #expect(info.aaguid == vector.bytes("aaguid"))
        #expect(info.options == Dictionary(uniqueKeysWithValues: vector.list("options").map { ($0, true) }))
        #expect(info.transports == vector.list("transports"))
        if vector.expect?["extensions"] != nil {
            #expect(info.extensions == vector.list("extensions"))
        } else {
            #expect(info.extensions == nil)
        }
        #expect(info.algorithms == nil && info.maxMsgSize == nil)
        #expect(info.encode() == vector.bytes)
    }

    @Test("iOS 16 sends no extensions and lists transports unsorted")
    func iOS() throws {
        let info = try AuthenticatorGetInfoResponse(bytes: try CTAP2Case.named("ios16_getinfo").bytes)
        #expect(info.extensions == nil)
        #expect(info.transports == ["internal", "hybrid"])
        #expect(info.versions == ["FIDO_2_0"])
    }

    @Test("Chromium phone shape builds to the transcript bytes")
    func chromiumShape() throws {
        let info = AuthenticatorGetInfoResponse(
            versions: ["FIDO_2_0", "FIDO_2_1"], extensions: ["prf"], aaguid: Array(repeating: 0, count: 16),
            options: ["rk": true, "uv": true], transports: ["cable", "hybrid", "internal"])
        #expect(info.encode() == (try CTAP2Case.named("transcript_getinfo")).bytes)
    }

    @Test("all modelled keys round-trip; unknown keys are ignored")
    func fullRoundTrip() throws {
        let info = AuthenticatorGetInfoResponse(
            versions: ["FIDO_2_1"], extensions: ["credProtect"], aaguid: Array(0..<16),
            options: ["rk": true, "up": true, "plat": false], maxMsgSize: 1200, pinUvAuthProtocols: [2, 1],
            maxCredentialCountInList: 8, maxCredentialIdLength: 128, transports: ["usb"],
            algorithms: [PublicKeyCredentialParameters(alg: .es256), PublicKeyCredentialParameters(alg: .edDSA)],
            firmwareVersion: 5, remainingDiscoverableCredentials: 25, attestationFormats: ["packed"])
        let decoded = try AuthenticatorGetInfoResponse(bytes: info.encode())
        #expect(decoded == info)
        guard case .map(var map) = info.cbor else { return }
        map[0x0B] = 1024
        map[0x13] = ["FIDO": 1]
        #expect(try AuthenticatorGetInfoResponse(cbor: .map(map)) == info)
    }
}
