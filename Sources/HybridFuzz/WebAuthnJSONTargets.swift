import Foundation
import HybridSim

/// The WebAuthn options JSON a relying party's server sends (`desktop --options`, `--rp-url`).
enum WebAuthnJSONTargets {
    static let all = [creationOptions, requestOptions]

    static let creationSeed = #"{"challenge":"AAECAwQFBgcICQoLDA0ODw","rp":{"name":"Example","id":"example.com"},"user":{"id":"AQID","name":"alice","displayName":"Alice"},"pubKeyCredParams":[{"alg":-7,"type":"public-key"}],"timeout":60000,"attestation":"none","authenticatorSelection":{"residentKey":"required","userVerification":"preferred"}}"#
    static let requestSeed = #"{"publicKey":{"challenge":"AAECAwQFBgcICQoLDA0ODw","rpId":"example.com","allowCredentials":[{"id":"wcHBwQ","type":"public-key","transports":["hybrid"]}],"userVerification":"preferred","timeout":60000}}"#

    /// Creation options: what parses survives being written as JSON and parsed again.
    static let creationOptions = FuzzTarget(
        "webauthn-creation-options",
        "PublicKeyCredentialCreationOptionsJSON.parse(document:) (all shapes); the options survive a JSON round trip",
        seeds: { [Array(creationSeed.utf8), Array(#"{"options":\#(creationSeed)}"#.utf8)] }
    ) { input in
        guard let parsed = try? PublicKeyCredentialCreationOptionsJSON.parse(document: input) else { return .rejected }
        guard let json = try? JSONEncoder().encode(parsed.options) else {
            return .violation("accepted creation options cannot be encoded: \(input.fuzzHex)")
        }
        let again = try? PublicKeyCredentialCreationOptionsJSON.parse(document: Array(json))
        return FuzzTarget.check(
            again?.options == parsed.options, "creation options \(input.fuzzHex) do not survive a JSON round trip")
    }

    /// Request options: the same invariant.
    static let requestOptions = FuzzTarget(
        "webauthn-request-options",
        "PublicKeyCredentialRequestOptionsJSON.parse(document:) (all shapes); the options survive a JSON round trip",
        seeds: { [Array(requestSeed.utf8)] }
    ) { input in
        guard let parsed = try? PublicKeyCredentialRequestOptionsJSON.parse(document: input) else { return .rejected }
        guard let json = try? JSONEncoder().encode(parsed.options) else {
            return .violation("accepted request options cannot be encoded: \(input.fuzzHex)")
        }
        let again = try? PublicKeyCredentialRequestOptionsJSON.parse(document: Array(json))
        return FuzzTarget.check(
            again?.options == parsed.options, "request options \(input.fuzzHex) do not survive a JSON round trip")
    }
}
