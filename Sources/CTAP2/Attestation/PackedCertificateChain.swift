import Crypto
import Foundation
import SwiftASN1
import X509

/// The checks of a `"packed"` statement's `x5c` (WebAuthn L3 §8.2 "Packed Attestation Statement
/// Format", verification procedure when `x5c` is present, and §8.2.1 "Certificate Requirements for
/// Packed Attestation Statements"). Parsing and signatures are swift-certificates'; the order and
/// the rules are here. Pure: the time is the caller's.
enum PackedCertificateChain {
    /// `id-fido-gen-ce-aaguid` (FIDO Metadata / WebAuthn §8.2.1): the authenticator model's AAGUID.
    static let aaguidExtension: ASN1ObjectIdentifier = [1, 3, 6, 1, 4, 1, 45724, 1, 1, 4]
    /// The Subject-OU value §8.2.1 requires, exactly.
    static let attestationOU = "Authenticator Attestation"

    /// Verifies `sig` with the attestation certificate (`x5c[0]`), then §8.2.1, then the chain's
    /// integrity, then (with anchors) its trust. Returns the verdict for ``AttestationType/basic``.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidAttestation`` (empty or undecodable `x5c`, a §8.2.1 rule,
    ///   a certificate not signed by the next one), ``CTAP2Error/Code/unsupportedAlgorithm`` (not
    ///   ES256, or the attestation key is not P-256), ``CTAP2Error/Code/invalidSignature``, and
    ///   ``CTAP2Error/Code/untrustedAttestation`` (with anchors: no anchor signed the chain's end, or
    ///   a certificate outside its validity at `now`).
    static func verify(
        x5c: [[UInt8]],
        alg: COSEAlgorithmIdentifier,
        sig: [UInt8],
        signedData: [UInt8],
        aaguid: [UInt8],
        trustAnchors: AttestationTrustAnchors?,
        now: Date
    ) throws(CTAP2Error) -> VerifiedAttestation {
        guard !x5c.isEmpty else {
            throw CTAP2Error(.invalidAttestation, "packed x5c is empty; it must hold the attestation certificate")
        }
        let chain = try AttestationTrustAnchors.certificates(x5c, code: .invalidAttestation) { "packed x5c[\($0)]" }
        let leaf = chain[0]
        guard alg == .es256 else {
            throw CTAP2Error(.unsupportedAlgorithm, "packed full attestation alg \(alg) is not ES256 (-7)")
        }
        guard let key = P256.Signing.PublicKey(leaf.publicKey) else {
            throw CTAP2Error(.unsupportedAlgorithm, "packed x5c[0]'s public key is not a P-256 key, as alg ES256 (-7) needs")
        }
        do {
            try ES256.verify(signature: sig, over: signedData, publicKey: key)
        } catch {
            throw CTAP2Error(.invalidSignature, "packed full attestation: \(error.reason) with the key of x5c[0]")
        }
        try checkRequirements(leaf, aaguid: aaguid)
        for index in chain.indices.dropLast() where chain[index].issuer != chain[index + 1].subject {
            throw CTAP2Error(
                .invalidAttestation,
                "packed x5c[\(index)]'s issuer (\(chain[index].issuer)) is not x5c[\(index + 1)]'s subject (\(chain[index + 1].subject)): "
                    + "each certificate must be issued by the one after it")
        }
        for index in chain.indices.dropLast() where !chain[index + 1].publicKey.isValidSignature(chain[index].signature, for: chain[index]) {
            throw CTAP2Error(
                .invalidAttestation,
                "packed x5c[\(index + 1)] did not sign x5c[\(index)]: each certificate must be signed by the one after it")
        }
        guard let trustAnchors else {
            return VerifiedAttestation(type: .basic, trustPath: x5c, trust: .notEstablished)
        }
        let root = try anchor(chain, in: trustAnchors)
        for (index, certificate) in chain.enumerated() {
            try checkValidity(certificate, "x5c[\(index)]", now: now)
        }
        try checkValidity(root, "the trusted root", now: now)
        return VerifiedAttestation(type: .basic, trustPath: x5c, trust: .anchored(root: root.subject.description))
    }

    /// §8.2.1, in the order the specification lists them.
    static func checkRequirements(_ certificate: Certificate, aaguid: [UInt8]) throws(CTAP2Error) {
        func fail(_ rule: String) -> CTAP2Error {
            CTAP2Error(.invalidAttestation, "packed x5c[0] breaks WebAuthn §8.2.1: \(rule)")
        }
        guard certificate.version == .v3 else {
            throw fail("it is an X.509 \(certificate.version) certificate; version 3 is required")
        }
        let subject = attributes(of: certificate.subject)
        let country = subject[.RDNAttributeType.countryName] ?? []
        guard country.count == 1, let c = country.first, c.count == 2, c.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
            throw fail("Subject-C must be one ISO 3166 two-letter country code, is \(country)")
        }
        guard let o = subject[.RDNAttributeType.organizationName], o.count == 1, !o[0].isEmpty else {
            throw fail("Subject-O must be the vendor's legal name, is \(subject[.RDNAttributeType.organizationName] ?? [])")
        }
        let ou = subject[.RDNAttributeType.organizationalUnitName] ?? []
        guard ou == [attestationOU] else {
            throw fail("Subject-OU must be \"\(attestationOU)\", is \(ou)")
        }
        guard let cn = subject[.RDNAttributeType.commonName], cn.count == 1, !cn[0].isEmpty else {
            throw fail("Subject-CN must be present, is \(subject[.RDNAttributeType.commonName] ?? [])")
        }
        let constraints: BasicConstraints?
        do {
            constraints = try certificate.extensions.basicConstraints
        } catch {
            throw fail("its Basic Constraints extension does not decode (\(error))")
        }
        // Absent Basic Constraints means "not a CA" (RFC 5280 §4.2.1.9), which is what §8.2.1 asks.
        if case .some(.isCertificateAuthority) = constraints {
            throw fail("Basic Constraints must have CA false, has CA true")
        }
        if let fido = certificate.extensions[oid: aaguidExtension] {
            guard !fido.critical else {
                throw fail("the id-fido-gen-ce-aaguid extension (1.3.6.1.4.1.45724.1.1.4) must not be critical")
            }
            let value: ASN1OctetString
            do {
                value = try ASN1OctetString(derEncoded: fido.value)
            } catch {
                throw fail("the id-fido-gen-ce-aaguid extension is not an OCTET STRING")
            }
            guard Array(value.bytes) == aaguid else {
                throw fail(
                    "the id-fido-gen-ce-aaguid extension holds \(Hex.encode(Array(value.bytes))), authData's aaguid is \(Hex.encode(aaguid))")
            }
        }
    }

    /// The root that signed the chain's last certificate (or is it), by subject and signature.
    private static func anchor(_ chain: [Certificate], in anchors: AttestationTrustAnchors) throws(CTAP2Error) -> Certificate {
        // Every certificate after x5c[0] signs another: RFC 5280 wants each to be a CA.
        for index in chain.indices.dropFirst() {
            guard case .some(.isCertificateAuthority) = try? chain[index].extensions.basicConstraints else {
                throw CTAP2Error(.untrustedAttestation, "packed x5c[\(index)] signs a certificate but is not a CA (Basic Constraints)")
            }
        }
        let last = chain[chain.count - 1]
        if let root = anchors.roots.first(where: { $0 == last }) { return root }
        let named = anchors.roots.filter { $0.subject == last.issuer }
        guard let root = named.first(where: { $0.publicKey.isValidSignature(last.signature, for: last) }) else {
            // A root of the issuer's name whose key did not sign: say so, or the two names read alike.
            let hint =
                named.isEmpty
                ? ""
                : "; a trusted root has that name but its key did not sign it (another CA of the same name, "
                    + "or the certificate was changed after it was signed)"
            throw CTAP2Error(
                .untrustedAttestation,
                "packed x5c[\(chain.count - 1)] (issuer \(last.issuer)) is not signed by any of the \(anchors.count) trusted root(s)\(hint)")
        }
        return root
    }

    private static func checkValidity(_ certificate: Certificate, _ name: String, now: Date) throws(CTAP2Error) {
        if now < certificate.notValidBefore {
            throw CTAP2Error(
                .untrustedAttestation, "packed \(name) is not valid yet: from \(certificate.notValidBefore), now is \(now)")
        }
        if now > certificate.notValidAfter {
            throw CTAP2Error(.untrustedAttestation, "packed \(name) expired at \(certificate.notValidAfter), now is \(now)")
        }
    }

    /// A name's attribute values by type, in the order they appear (a value that is not a string
    /// reads as empty, so a rule that wants the attribute present and non-empty fails).
    private static func attributes(of name: DistinguishedName) -> [ASN1ObjectIdentifier: [String]] {
        var values: [ASN1ObjectIdentifier: [String]] = [:]
        for rdn in name {
            for attribute in rdn {
                values[attribute.type, default: []].append(String(attribute.value) ?? "")
            }
        }
        return values
    }
}
