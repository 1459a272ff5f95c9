import CTAP2
import HybridTestSupport
import Testing

/// makeCredential requests: the CTAP 2.1 spec example (framing.json) and webauthn-rs's request (crypter.json).
@Suite("MakeCredentialRequest")
struct MakeCredentialRequestTests {
    @Test("decodes into its fields and re-encodes byte-exact",
        arguments: ["ctap21_spec_makecredential_request", "webauthn_rs_makecredential_request"])
    func knownAnswer(_ name: String) throws {
        let vector = try CTAP2Case.named(name)
        let request = try MakeCredentialRequest(bytes: vector.bytes)
        #expect(request.clientDataHash.count == 32)
        #expect(request.rp.id == vector.field("rpId"))
        #expect(request.rp.name == vector.field("rpName"))
        #expect(request.user.name == vector.field("userName"))
        #expect(request.user.displayName == vector.field("userDisplayName"))
        #expect(request.pubKeyCredParams.map(\.alg.rawValue) == vector.list("algs").compactMap { Int($0) })
        #expect(request.pubKeyCredParams.allSatisfy { $0.type == "public-key" })
        if let rk = vector.expect?["rk"] { #expect(request.options?.rk == (rk == "true")) }
        if let uv = vector.expect?["uv"] { #expect(request.options?.uv == (uv == "true")) }
        if let id = vector.expect?["excludeListId"] {
            #expect(request.excludeList == [PublicKeyCredentialDescriptor(id: hex(id))])
        } else {
            #expect(request.excludeList == nil)
        }
        #expect(request.encode() == vector.bytes)
        #expect(CTAP2Request.makeCredential(request).encode() == [0x01] + vector.bytes)
        #expect(try CTAP2Request(bytes: [0x01] + vector.bytes) == .makeCredential(request))
    }

    @Test("the spec example has the spec's user")
    func specExampleUser() throws {
        let request = try MakeCredentialRequest(bytes: try CTAP2Case.named("ctap21_spec_makecredential_request").bytes)
        #expect(request.user.id == hex("2b6689bb18f4169f069fbcdf50cb6ea3c60a861b9a7b63946983e0b577b78c70"))
        #expect(request.pubKeyCredParams.first?.alg == .es256)
        #expect(request.pubKeyCredParams.map(\.alg) == [.es256, .rs256, .ps256])
    }

    @Test("all optional fields survive a round trip")
    func fullRoundTrip() throws {
        let request = MakeCredentialRequest(
            clientDataHash: Array(repeating: 0xAB, count: 32),
            rp: PublicKeyCredentialRpEntity(id: "example.com", name: "Example"),
            user: PublicKeyCredentialUserEntity(id: [1, 2, 3], name: "alice", displayName: "Alice"),
            pubKeyCredParams: [PublicKeyCredentialParameters(alg: .es256), PublicKeyCredentialParameters(alg: .edDSA)],
            excludeList: [PublicKeyCredentialDescriptor(id: [9, 9], transports: ["hybrid", "internal"])],
            extensions: ["credProtect": 2, "prf": [:]],
            options: AuthenticatorOptions(rk: true, up: nil, uv: false),
            pinUvAuthParam: [0xEE],
            pinUvAuthProtocol: 2,
            enterpriseAttestation: 1,
            attestationFormatsPreference: ["packed", "none"]
        )
        let bytes = request.encode()
        let decoded = try MakeCredentialRequest(bytes: bytes)
        #expect(decoded == request)
        #expect(decoded.encode() == bytes)
    }

    @Test("unknown keys are ignored, at the top level and in entities")
    func unknownKeysIgnored() throws {
        let base = try MakeCredentialRequest(bytes: try CTAP2Case.named("ctap21_spec_makecredential_request").bytes)
        guard case .map(var map) = base.cbor, case .map(var rp) = map[2] else {
            Issue.record("not a map")
            return
        }
        rp["icon"] = "https://example.com/icon.png"
        map[2] = .map(rp)
        map[0x20] = "future"
        map["text key"] = 1
        #expect(try MakeCredentialRequest(cbor: .map(map)) == base)
    }

    @Test("errors name the field", arguments: [
        ("makecredential_missing_user", "0x03 (user)"),
        ("makecredential_user_id_text", "\"id\""),
        ("makecredential_alg_text", "\"alg\""),
    ])
    func errorsNameTheField(_ name: String, _ fragment: String) throws {
        let vector = try CTAP2Case.named(name)
        do {
            _ = try MakeCredentialRequest(bytes: vector.bytes)
            Issue.record("accepted")
        } catch {
            #expect(error.reason.contains(fragment), "\(error.reason)")
        }
    }

    @Test("a clientDataHash that is not 32 bytes is invalidLength")
    func clientDataHashLength() throws {
        var request = try MakeCredentialRequest(bytes: try CTAP2Case.named("ctap21_spec_makecredential_request").bytes)
        request.clientDataHash = [0]
        #expect(throws: CTAP2Error(.invalidLength)) { try MakeCredentialRequest(bytes: request.encode()) }
    }
}
