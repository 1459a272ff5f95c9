import Foundation
import SwiftASN1
import X509

/// The root certificates a relying party trusts for full (`x5c`) attestation (WebAuthn L3 §7.1
/// step 23: "obtain a list of acceptable trust anchors … from a trusted source or from policy").
///
/// Pure: the caller reads the file; this type only parses what it is given. With anchors, a
/// `"packed"` statement with `x5c` must chain to one of them, and every certificate of the chain and
/// the anchor itself must be within its validity at the time the caller passes. Without anchors the
/// chain is still checked for integrity, and the verdict says trust was not established
/// (``VerifiedAttestation/Trust-swift.enum/notEstablished``).
public struct AttestationTrustAnchors: Hashable, Sendable {
    /// The roots, as parsed.
    let roots: [Certificate]

    /// The roots' DER encodings, in the order given.
    public let derEncodedRoots: [[UInt8]]

    /// Roots from their DER encodings.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidValue`` when there are none or one is not an X.509 certificate.
    public init(derEncodedRoots: [[UInt8]]) throws(CTAP2Error) {
        guard !derEncodedRoots.isEmpty else {
            throw CTAP2Error(.invalidValue, "attestation trust anchors: no certificate given")
        }
        self.roots = try Self.certificates(derEncodedRoots, code: .invalidValue) { "attestation trust anchor \($0 + 1)" }
        self.derEncodedRoots = derEncodedRoots
    }

    /// Each DER encoding as a certificate; the first that is none fails with `code`, named by
    /// `name(index)` (`packed x5c[1]`, `attestation trust anchor 2`).
    static func certificates(
        _ encodings: [[UInt8]], code: CTAP2Error.Code, name: (Int) -> String
    ) throws(CTAP2Error) -> [Certificate] {
        var certificates: [Certificate] = []
        for (index, der) in encodings.enumerated() {
            do {
                certificates.append(try Certificate(derEncoded: der))
            } catch {
                throw CTAP2Error(code, "\(name(index)) is not an X.509 certificate: \(error)")
            }
        }
        return certificates
    }

    /// Roots from a PEM text holding one or more `CERTIFICATE` blocks (other blocks are an error).
    ///
    /// - Throws: ``CTAP2Error/Code/invalidValue`` when the text has no certificate, a block is not
    ///   PEM, not a `CERTIFICATE`, or not an X.509 certificate.
    public init(pem: String) throws(CTAP2Error) {
        let documents: [PEMDocument]
        do {
            documents = try PEMDocument.parseMultiple(pemString: pem)
        } catch {
            throw CTAP2Error(.invalidValue, "attestation trust anchors: not PEM (\(error))")
        }
        var ders: [[UInt8]] = []
        for (index, document) in documents.enumerated() {
            guard document.discriminator == "CERTIFICATE" else {
                throw CTAP2Error(
                    .invalidValue,
                    "attestation trust anchors: PEM block \(index + 1) is \"\(document.discriminator)\", not \"CERTIFICATE\"")
            }
            ders.append(Array(document.derBytes))
        }
        try self.init(derEncodedRoots: ders)
    }

    /// The number of roots.
    public var count: Int { roots.count }
}

/// What a verified attestation statement proves, and how far its certificate chain is trusted.
public struct VerifiedAttestation: Hashable, Sendable {
    /// How far a full attestation's certificate chain is trusted (WebAuthn L3 §7.1 steps 23–24 leave
    /// the decision to the relying party's policy).
    public enum Trust: Hashable, Sendable {
        /// `none` or self attestation: there is no certificate chain to trust.
        case notApplicable
        /// The chain verified (signature, §8.2.1 requirements, each certificate signed by the next)
        /// but no trust anchors were configured: the authenticator's model is claimed, not proven.
        case notEstablished
        /// The chain ends at the configured root whose subject this is, and every certificate was
        /// within its validity at the time given.
        case anchored(root: String)
    }

    /// The attestation type.
    public let type: AttestationType
    /// The attestation trust path: `x5c` as received, attestation certificate first (DER); empty
    /// for `none` and self attestation.
    public let trustPath: [[UInt8]]
    /// Whether the trust path ends at a configured root.
    public let trust: Trust

    /// Creates a verdict.
    public init(type: AttestationType, trustPath: [[UInt8]] = [], trust: Trust = .notApplicable) {
        self.type = type
        self.trustPath = trustPath
        self.trust = trust
    }

    /// One phrase for people, e.g. `basic, x5c of 2 certificates, not chained to a trusted root`,
    /// `self`, `none`.
    public var summary: String {
        switch trust {
        case .notApplicable:
            return type.rawValue
        case .notEstablished:
            return "\(type.rawValue), x5c of \(certificates), not chained to a trusted root"
        case .anchored(let root):
            return "\(type.rawValue), x5c of \(certificates), chained to trusted root \(root)"
        }
    }

    /// Whether the trust path ends at a configured root.
    public var isTrusted: Bool {
        if case .anchored = trust { return true }
        return false
    }

    private var certificates: String { trustPath.count == 1 ? "1 certificate" : "\(trustPath.count) certificates" }
}
