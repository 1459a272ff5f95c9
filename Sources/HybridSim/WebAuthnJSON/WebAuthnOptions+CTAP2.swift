import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// What a browser does with options before it talks CTAP2 (WebAuthn L3 §5.1.3, §5.1.4; CTAP 2.2
/// §6.1, §6.2), and the relying-party configuration that checks the answer.
///
/// The mapping follows Chrome over hybrid: `uv` is requested unless user verification is
/// `"discouraged"` (phones always verify the user), `rk` unless the resident key in effect is
/// `"discouraged"` (absent or unknown `residentKey` without `requireResidentKey` is), empty allow
/// and exclude lists are omitted, descriptors and parameters of other types than `public-key` are
/// skipped, and descriptors go without their `transports` (Chromium's `AsCBOR` leaves them out:
/// some security keys refuse them, crbug 1270757).
extension PublicKeyCredentialCreationOptionsJSON {
    /// The RP ID in effect: `rp.id`, or the host of `origin` when absent.
    public func effectiveRpId(origin: String) -> String {
        rp.id ?? WebAuthnOrigin.host(of: origin)
    }

    /// The authenticatorMakeCredential request for these options.
    public func makeCredentialRequest(clientDataHash: [UInt8], rpId: String) -> MakeCredentialRequest {
        let excluded = (excludeCredentials ?? []).filter { $0.type == PublicKeyCredentialDescriptor.publicKeyType }
        return MakeCredentialRequest(
            clientDataHash: clientDataHash,
            rp: PublicKeyCredentialRpEntity(id: rpId, name: rp.name ?? rpId),
            user: PublicKeyCredentialUserEntity(
                id: user.id.bytes, name: user.name, displayName: user.displayName ?? ""),
            pubKeyCredParams: effectivePubKeyCredParams.filter { $0.type == PublicKeyCredentialDescriptor.publicKeyType }.map {
                PublicKeyCredentialParameters(type: $0.type, alg: COSEAlgorithmIdentifier(rawValue: $0.alg))
            },
            excludeList: excluded.isEmpty
                ? nil
                : excluded.map { PublicKeyCredentialDescriptor(type: $0.type, id: $0.id.bytes) },
            options: AuthenticatorOptions(
                // Sent only when true, as Chromium sends it (`rk: false` is the default).
                rk: effectiveResidentKey != "discouraged" ? true : nil,
                uv: effectiveUserVerification == "discouraged" ? nil : true)
        )
    }

    /// The relying party that verifies the registration (UV required when `userVerification` is `"required"`).
    public func relyingParty(origin: String) -> RelyingParty {
        RelyingParty(
            id: effectiveRpId(origin: origin), origin: origin,
            requireUserVerification: effectiveUserVerification == "required")
    }

    /// The user entity the registered credential belongs to.
    public var userEntity: PublicKeyCredentialUserEntity {
        PublicKeyCredentialUserEntity(id: user.id.bytes, name: user.name, displayName: user.displayName)
    }
}

extension PublicKeyCredentialRequestOptionsJSON {
    /// The RP ID in effect: `rpId`, or the host of `origin` when absent.
    public func effectiveRpId(origin: String) -> String {
        rpId ?? WebAuthnOrigin.host(of: origin)
    }

    /// The authenticatorGetAssertion request for these options.
    public func getAssertionRequest(clientDataHash: [UInt8], rpId: String) -> GetAssertionRequest {
        let allowed = (allowCredentials ?? []).filter { $0.type == PublicKeyCredentialDescriptor.publicKeyType }
        return GetAssertionRequest(
            rpId: rpId,
            clientDataHash: clientDataHash,
            allowList: allowed.isEmpty ? nil : allowed.map { PublicKeyCredentialDescriptor(type: $0.type, id: $0.id.bytes) },
            options: AuthenticatorOptions(uv: effectiveUserVerification == "discouraged" ? nil : true)
        )
    }

    /// The relying party that verifies the assertion (UV required when `userVerification` is `"required"`).
    public func relyingParty(origin: String) -> RelyingParty {
        RelyingParty(
            id: effectiveRpId(origin: origin), origin: origin,
            requireUserVerification: effectiveUserVerification == "required")
    }
}

/// Origin helpers.
enum WebAuthnOrigin {
    /// The host of an origin such as `https://example.com:8443` (the origin itself if it has none).
    static func host(of origin: String) -> String {
        URLComponents(string: origin)?.host ?? origin
    }

    /// Checks an RP ID written in options (`member`: where, e.g. `publicKey.rp.id`): not empty, and
    /// not a URL or a host with a port or user: a character a host name cannot hold (`:`, `/`, `@`,
    /// `?`, `#`, `\`, a space or control character) is refused, named, since the origin made
    /// from it would not be one (a browser's `create()`/`get()` refuses such an RP ID). Anything a
    /// host may hold passes here (upper case, an IDN, a trailing dot, `_`); the RP ID rules after
    /// say how to write the first two.
    static func checkRpId(_ rpId: String, member: String) throws(WebAuthnJSONError) {
        guard !rpId.isEmpty else { throw WebAuthnJSONError(.invalidValue, "\(member) is empty") }
        // White space and what could hide in text (controls, bidi marks) are named by code point.
        func unseen(_ scalar: Unicode.Scalar) -> Bool { scalar.properties.isWhitespace || scalar.isHiddenInPeerText }
        if let bad = rpId.unicodeScalars.first(where: { ":/@?#\\".unicodeScalars.contains($0) || unseen($0) }) {
            let what = bad == " " ? "a space" : unseen(bad) ? "U+\(String(bad.value, radix: 16, uppercase: true))" : "\"\(bad)\""
            throw WebAuthnJSONError(
                .invalidValue,
                "\(member) \"\(PeerText.printable(rpId, limit: 100))\" is not a host name such as example.com: it holds \(what) "
                    + "(an RP ID is a domain: no scheme, port, user or path)")
        }
    }
}
