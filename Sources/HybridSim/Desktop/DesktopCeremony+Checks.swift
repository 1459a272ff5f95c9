import CTAP2
import HybridRuntime
import NIOCore

extension DesktopCeremony {
    /// Whether `host` (as an origin serializes it, an IPv6 address with or without its brackets)
    /// is an IP address, read as the socket layer reads one (`inet_pton`, through SwiftNIO).
    static func isIPAddress(_ host: String) -> Bool {
        (try? SocketAddress(ipAddress: LoopbackAddress.unbracketed(host), port: 0)) != nil
    }
}

extension AuthenticatorData {
    /// The same data with an all-zero AAGUID, as a browser leaves it for attestation conveyance
    /// `none` (WebAuthn L3 §5.4.7: the authenticator model is not revealed); unchanged when the
    /// AAGUID already is zero or there is no attested credential data.
    ///
    /// - Throws: the initializers' ``CTAP2Error`` should they refuse the parts of `self` (they
    ///   check what parsing already checked, so no parsed data fails); until 2026-11-28 such a
    ///   refusal returned `self`, its AAGUID kept, without a word.
    func zeroingAAGUID() throws(CTAP2Error) -> AuthenticatorData {
        guard let attested = attestedCredentialData, attested.aaguid.contains(where: { $0 != 0 }) else { return self }
        let zeroed = try AttestedCredentialData(
            aaguid: [UInt8](repeating: 0, count: 16), credentialId: attested.credentialId,
            credentialPublicKeyBytes: attested.credentialPublicKey)
        return try AuthenticatorData(
            rpIdHash: rpIdHash, flags: flags, signCount: signCount, attestedCredentialData: zeroed, extensions: extensions)
    }
}
