import CTAP2
import Crypto
import Foundation
import SwiftASN1
import X509

/// What a phone needs for `"packed"` full attestation: the attestation key and the certificate
/// chain it sends as `x5c` (the attestation certificate first), and the AAGUID it names.
public struct AttestationIdentity: Sendable {
    /// The attestation private key (`x5c[0]` certifies its public key).
    public let attestationKey: P256.Signing.PrivateKey
    /// `x5c`: DER certificates, the attestation certificate first (the root is not sent).
    public let x5c: [[UInt8]]
    /// The AAGUID the certificate names; a credential made with this identity carries it.
    public let aaguid: [UInt8]

    /// Creates an identity from its parts.
    public init(attestationKey: P256.Signing.PrivateKey, x5c: [[UInt8]], aaguid: [UInt8]) {
        self.attestationKey = attestationKey
        self.x5c = x5c
        self.aaguid = aaguid
    }
}

/// The simulated phone's attestation CA (`phone --attestation packed-x5c`).
///
/// The root is **the same in every run and on every machine**: its key is SHA-256 of a public
/// label, so a root PEM written once (`--attestation-root-out`) stays a trust anchor for later runs
/// and a relying party can be configured before the phone starts. The price is that anyone can
/// issue certificates under it: it proves nothing about a device and must never be trusted by a
/// real relying party. Each run gets a fresh attestation key and certificate (from the phone's
/// random source), valid from a day before `now` for a year, meeting WebAuthn §8.2.1.
public enum SimulatedAttestationCA {
    /// The AAGUID the simulated attestation certificates name: the first 16 bytes of SHA-256 of
    /// `HybridSim simulated authenticator`.
    public static let aaguid: [UInt8] = Array(SHA256.hash(data: Array("HybridSim simulated authenticator".utf8)).prefix(16))

    /// The root's subject common name.
    public static let rootCommonName = "HybridSim Simulated Attestation Root CA (not a real vendor)"

    /// The root's key: SHA-256 of a public label as the P-256 scalar. Not secret, by design.
    static var rootKey: P256.Signing.PrivateKey {
        let scalar = SHA256.hash(data: Array("HybridSim simulated attestation root CA, version 1 (public, not secret)".utf8))
        return try! P256.Signing.PrivateKey(rawRepresentation: Array(scalar))  // a 256-bit hash is below n but for ~2^-32
    }

    static var rootName: DistinguishedName {
        try! DistinguishedName {
            CountryName("US")
            OrganizationName("HybridSim")
            CommonName(rootCommonName)
        }
    }

    /// 2025-01-01T00:00:00Z to 2050-01-01T00:00:00Z: fixed, so every run's root is the same CA.
    static let rootValidity = (
        Date(timeIntervalSince1970: 1_735_689_600), Date(timeIntervalSince1970: 2_524_608_000)
    )

    /// The root certificate (self-signed, CA, keyCertSign). Its bytes differ between calls (ECDSA
    /// signatures are randomized) but its key, subject and validity do not, so any copy anchors.
    package static func rootCertificate() -> Certificate {
        try! Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(bytes: [0x01]), publicKey: .init(rootKey.publicKey),
            notValidBefore: rootValidity.0, notValidAfter: rootValidity.1, issuer: rootName, subject: rootName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(rootKey))
    }

    /// The root as one PEM `CERTIFICATE` block, for a relying party's `--attestation-roots`.
    public static func rootPEM() -> String {
        try! rootCertificate().serializeAsPEM().pemString + "\n"
    }

    /// A fresh attestation key and certificate under the root.
    ///
    /// - Parameters:
    ///   - random: where the attestation key and serial number come from.
    ///   - now: seconds since the Unix epoch; the certificate is valid from a day before for a year.
    public static func identity(random: RandomSource, now: UInt64) -> AttestationIdentity {
        let key = random.signingKey()
        var serial = random.bytes(16)
        serial[0] &= 0x7F  // a positive INTEGER
        serial[0] |= 0x40  // and 16 bytes long
        let start = Date(timeIntervalSince1970: TimeInterval(now))
        let subject = try! DistinguishedName {
            CountryName("US")
            OrganizationName("HybridSim")
            OrganizationalUnitName("Authenticator Attestation")
            CommonName("HybridSim Simulated Phone Attestation")
        }
        var aaguidValue = DER.Serializer()
        try! aaguidValue.serialize(ASN1OctetString(contentBytes: aaguid[...]))
        let certificate = try! Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(bytes: serial), publicKey: .init(key.publicKey),
            notValidBefore: start.addingTimeInterval(-86_400), notValidAfter: start.addingTimeInterval(365 * 86_400),
            issuer: rootName, subject: subject, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions([
                try Critical(BasicConstraints.notCertificateAuthority).makeCertificateExtension(),
                Certificate.Extension(
                    oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4], critical: false, value: aaguidValue.serializedBytes[...]),
            ]),
            issuerPrivateKey: .init(rootKey))
        var der = DER.Serializer()
        try! der.serialize(certificate)
        return AttestationIdentity(attestationKey: key, x5c: [der.serializedBytes], aaguid: aaguid)
    }
}
