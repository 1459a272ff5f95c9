import Crypto
import Foundation
import SwiftASN1
import X509

/// Certificates for packed full-attestation tests, made with swift-certificates: a root CA, an
/// optional intermediate, and attestation certificates that meet WebAuthn §8.2.1 or break one rule
/// each (``Leaf``). Fresh keys per instance; validity around ``around`` (by default a fixed time,
/// ``now``; a check by a library that reads the clock, py_webauthn, passes the real time).
public struct TestAttestationPKI: Sendable {
    /// The time the certificates are valid around (2026-01-01T00:00:00Z).
    public static let now = Date(timeIntervalSince1970: 1_767_225_600)
    /// `now` as seconds since the Unix epoch, the relying party's clock.
    public static let nowSeconds: UInt64 = 1_767_225_600
    /// The AAGUID the attestation certificates name (`id-fido-gen-ce-aaguid`).
    public static let aaguid: [UInt8] = Array(0xA0...0xAF)

    /// The root CA's key.
    public let rootKey = P256.Signing.PrivateKey()
    /// The root CA certificate (self-signed, CA true, keyCertSign).
    public let root: Certificate
    /// The attestation key the leaves certify.
    public let attestationKey = P256.Signing.PrivateKey()
    /// The time every certificate's validity is placed around.
    public let around: Date

    /// What an attestation certificate looks like; the defaults meet §8.2.1.
    public struct Leaf: Sendable {
        /// X.509 version (§8.2.1: 3).
        public var version: Certificate.Version = .v3
        /// Subject C, O, OU, CN (`nil` leaves one out).
        public var country: String? = "US"
        public var organization: String? = "HybridSim Test Vendor"
        public var organizationalUnit: String? = "Authenticator Attestation"
        public var commonName: String? = "HybridSim Test Attestation"
        /// Basic Constraints: `false` CA false, `true` CA true, `nil` no extension.
        public var certificateAuthority: Bool? = false
        /// The `id-fido-gen-ce-aaguid` value; `nil` leaves the extension out.
        public var aaguid: [UInt8]? = TestAttestationPKI.aaguid
        /// Whether that extension is marked critical (§8.2.1: it must not be).
        public var aaguidCritical = false
        /// Validity; `nil`: a day before ``around`` / a year after it.
        public var notBefore: Date?
        public var notAfter: Date?
        /// Signed by this key instead of the issuer's (a broken chain link).
        public var signer: P256.Signing.PrivateKey?

        /// A leaf that meets §8.2.1.
        public init() {}
    }

    /// A fresh root, valid a year either side of `around` (or until `rootNotAfter`).
    public init(around: Date = TestAttestationPKI.now, rootNotAfter: Date? = nil) {
        self.around = around
        let name = Self.name(country: "US", organization: "HybridSim Test Vendor", unit: nil, commonName: "HybridSim Test Root CA")
        root = try! Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(rootKey.publicKey),
            notValidBefore: around.addingTimeInterval(-365 * 86_400),
            notValidAfter: rootNotAfter ?? around.addingTimeInterval(365 * 86_400),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try! Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            },
            issuerPrivateKey: .init(rootKey))
    }

    /// An attestation certificate for ``attestationKey``, issued by `issuer` (the root by default).
    public func leaf(_ leaf: Leaf = Leaf(), issuer: (certificate: Certificate, key: P256.Signing.PrivateKey)? = nil) -> Certificate {
        let (issuerCertificate, issuerKey) = issuer ?? (root, rootKey)
        let extensions: Certificate.Extensions
        if leaf.version == .v1 {
            extensions = Certificate.Extensions()
        } else {
            var list: [Certificate.Extension] = []
            if let ca = leaf.certificateAuthority {
                let constraints: BasicConstraints = ca ? .isCertificateAuthority(maxPathLength: nil) : .notCertificateAuthority
                list.append(try! Critical(constraints).makeCertificateExtension())
            }
            if let aaguid = leaf.aaguid {
                var serializer = DER.Serializer()
                try! serializer.serialize(ASN1OctetString(contentBytes: aaguid[...]))
                list.append(
                    Certificate.Extension(
                        oid: [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4], critical: leaf.aaguidCritical, value: serializer.serializedBytes[...]))
            }
            extensions = try! Certificate.Extensions(list)
        }
        return try! Certificate(
            version: leaf.version, serialNumber: Certificate.SerialNumber(), publicKey: .init(attestationKey.publicKey),
            notValidBefore: leaf.notBefore ?? around.addingTimeInterval(-86_400),
            notValidAfter: leaf.notAfter ?? around.addingTimeInterval(365 * 86_400), issuer: issuerCertificate.subject,
            subject: Self.name(
                country: leaf.country, organization: leaf.organization, unit: leaf.organizationalUnit,
                commonName: leaf.commonName),
            signatureAlgorithm: .ecdsaWithSHA256, extensions: extensions,
            issuerPrivateKey: .init(leaf.signer ?? issuerKey))
    }

    /// An intermediate CA under the root, and its key.
    public func intermediate() -> (certificate: Certificate, key: P256.Signing.PrivateKey) {
        let key = P256.Signing.PrivateKey()
        let certificate = try! Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: .init(key.publicKey),
            notValidBefore: around.addingTimeInterval(-86_400), notValidAfter: around.addingTimeInterval(365 * 86_400),
            issuer: root.subject,
            subject: Self.name(country: "US", organization: "HybridSim Test Vendor", unit: nil, commonName: "HybridSim Test Intermediate"),
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try! Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: .init(rootKey))
        return (certificate, key)
    }

    /// A certificate's DER encoding.
    public static func der(_ certificate: Certificate) -> [UInt8] {
        var serializer = DER.Serializer()
        try! serializer.serialize(certificate)
        return serializer.serializedBytes
    }

    /// The root as PEM (one `CERTIFICATE` block).
    public var rootPEM: String { try! root.serializeAsPEM().pemString }

    private static func name(country: String?, organization: String?, unit: String?, commonName: String?) -> DistinguishedName {
        try! DistinguishedName {
            if let country { CountryName(country) }
            if let organization { OrganizationName(organization) }
            if let unit { OrganizationalUnitName(unit) }
            if let commonName { CommonName(commonName) }
        }
    }
}
