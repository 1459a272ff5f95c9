import CTAP2
import Crypto
import Foundation
import HybridTestSupport
import Testing
import X509

/// "packed" full attestation (`x5c`, WebAuthn L3 §8.2 and §8.2.1): certificates made here with
/// swift-certificates, one rule broken per case, each refused with the rule it names.
@Suite("Packed full attestation (x5c)")
struct PackedFullAttestationTests {
    let credential = TestCredential()
    let pki = TestAttestationPKI()
    var hash: [UInt8] { credential.clientData.hash }

    /// A response signed with the PKI's attestation key, carrying `x5c`.
    func response(_ x5c: [Certificate], aaguid: [UInt8] = TestAttestationPKI.aaguid) throws -> MakeCredentialResponse {
        try MakeCredentialResponse.packedFull(
            authData: try credential.authData(aaguid: aaguid), clientDataHash: hash,
            attestationKey: pki.attestationKey, x5c: x5c.map(TestAttestationPKI.der))
    }

    func verify(
        _ response: MakeCredentialResponse, anchors: AttestationTrustAnchors? = nil, now: Date = TestAttestationPKI.now
    ) throws -> VerifiedAttestation {
        try MakeCredentialResponse(bytes: response.encode())
            .verifyAttestation(clientDataHash: hash, trustAnchors: anchors, now: now)
    }

    /// The reason of the error `body` throws, after checking its code.
    func failure(_ code: CTAP2Error.Code, _ body: () throws -> Void) -> String {
        do {
            try body()
            Issue.record("expected \(code), nothing was thrown")
        } catch let error as CTAP2Error {
            #expect(error.code == code, "\(error)")
            return error.reason
        } catch {
            Issue.record("unexpected \(error)")
        }
        return ""
    }

    @Test("a §8.2.1 leaf under a root: basic, trust not established without anchors, anchored with the root")
    func accepted() throws {
        let response = try response([pki.leaf()])
        #expect(response.attStmt["x5c"]?.arrayValue?.count == 1)
        let unanchored = try verify(response)
        #expect(unanchored.type == .basic)
        #expect(unanchored.trust == .notEstablished)
        #expect(unanchored.trustPath == response.attStmt["x5c"]?.arrayValue?.compactMap(\.bytesValue))
        #expect(unanchored.summary == "basic, x5c of 1 certificate, not chained to a trusted root")
        // The old entry point says the type.
        #expect(try response.verifyAttestation(clientDataHash: hash) == .basic)

        let anchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        let anchored = try verify(response, anchors: anchors)
        #expect(anchored.type == .basic)
        #expect(anchored.isTrusted)
        #expect(anchored.summary.hasPrefix("basic, x5c of 1 certificate, chained to trusted root"))
    }

    @Test("leaf, intermediate (and the root itself in x5c) chain to the root")
    func intermediate() throws {
        let intermediate = pki.intermediate()
        let leaf = pki.leaf(issuer: intermediate)
        let anchors = try AttestationTrustAnchors(derEncodedRoots: [TestAttestationPKI.der(pki.root)])
        #expect(try verify(try response([leaf, intermediate.certificate]), anchors: anchors).isTrusted)
        #expect(try verify(try response([leaf, intermediate.certificate, pki.root]), anchors: anchors).isTrusted)
        // Without the intermediate the leaf's signer is unknown to the root.
        let reason = failure(.untrustedAttestation) { _ = try verify(try response([leaf]), anchors: anchors) }
        #expect(reason.contains("not signed by any of the 1 trusted root(s)"), "\(reason)")
        #expect(!reason.contains("a trusted root has that name"), "the intermediate's name is no root's: \(reason)")
        // Another CA of the root's name (a second PKI is built with the same names): the refusal says so.
        let stranger = try AttestationTrustAnchors(derEncodedRoots: [TestAttestationPKI.der(TestAttestationPKI().root)])
        let named = failure(.untrustedAttestation) { _ = try verify(try response([pki.leaf()]), anchors: stranger) }
        #expect(named.contains("not signed by any of the 1 trusted root(s); a trusted root has that name but its key did not sign it"), "\(named)")
    }

    @Test(
        "each §8.2.1 requirement refused on its own, naming it",
        arguments: [
            ("version", "version 3 is required"),
            ("country missing", "Subject-C"),
            ("country not ISO 3166 alpha-2", "Subject-C"),
            ("organization missing", "Subject-O"),
            ("OU wrong", "Subject-OU must be \"Authenticator Attestation\""),
            ("CN missing", "Subject-CN"),
            ("CA true", "CA false"),
            ("aaguid extension critical", "must not be critical"),
            ("aaguid extension mismatch", "authData's aaguid is"),
        ])
    func requirement(broken: String, words: String) throws {
        var leaf = TestAttestationPKI.Leaf()
        switch broken {
        case "version": leaf.version = .v1
        case "country missing": leaf.country = nil
        case "country not ISO 3166 alpha-2": leaf.country = "usa"
        case "organization missing": leaf.organization = nil
        case "OU wrong": leaf.organizationalUnit = "Authenticator"
        case "CN missing": leaf.commonName = nil
        case "CA true": leaf.certificateAuthority = true
        case "aaguid extension critical": leaf.aaguidCritical = true
        case "aaguid extension mismatch": leaf.aaguid = Array(repeating: 0x11, count: 16)
        default: Issue.record("unknown case \(broken)")
        }
        let response = try response([pki.leaf(leaf)])
        let reason = failure(.invalidAttestation) { _ = try verify(response) }
        #expect(reason.contains("§8.2.1") && reason.contains(words), "\(broken): \(reason)")
        // With the root configured the requirement still fails first (not a trust problem).
        let anchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        #expect(throws: CTAP2Error(.invalidAttestation)) { _ = try verify(response, anchors: anchors) }
    }

    @Test("what §8.2.1 allows: no Basic Constraints (not a CA), no aaguid extension, a zero AAGUID without it")
    func allowed() throws {
        var leaf = TestAttestationPKI.Leaf()
        leaf.certificateAuthority = nil
        leaf.aaguid = nil
        #expect(try verify(try response([pki.leaf(leaf)], aaguid: Array(repeating: 0, count: 16))).type == .basic)
    }

    @Test("a chain link not signed by the next certificate is invalidAttestation, with or without roots")
    func brokenLink() throws {
        let intermediate = pki.intermediate()
        var leaf = TestAttestationPKI.Leaf()
        leaf.signer = P256.Signing.PrivateKey()  // issuer name says the intermediate, signature says otherwise
        let response = try response([pki.leaf(leaf, issuer: intermediate), intermediate.certificate])
        let reason = failure(.invalidAttestation) { _ = try verify(response) }
        #expect(reason.contains("x5c[1] did not sign x5c[0]"), "\(reason)")
        let anchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        #expect(throws: CTAP2Error(.invalidAttestation)) { _ = try verify(response, anchors: anchors) }
    }

    @Test("with roots: a root that did not sign, an expired leaf, a not-yet-valid leaf, an expired root")
    func trust() throws {
        let good = try response([pki.leaf()])
        let stranger = TestAttestationPKI()
        let otherAnchors = try AttestationTrustAnchors(pem: stranger.rootPEM)
        #expect(throws: CTAP2Error(.untrustedAttestation)) { _ = try verify(good, anchors: otherAnchors) }

        let anchors = try AttestationTrustAnchors(pem: pki.rootPEM)
        var expired = TestAttestationPKI.Leaf()
        expired.notAfter = TestAttestationPKI.now.addingTimeInterval(-60)
        let expiredResponse = try response([pki.leaf(expired)])
        let reason = failure(.untrustedAttestation) { _ = try verify(expiredResponse, anchors: anchors) }
        #expect(reason.contains("x5c[0] expired at"), "\(reason)")
        // Without roots validity is not judged (trust is the relying party's policy).
        #expect(try verify(expiredResponse).trust == .notEstablished)

        var early = TestAttestationPKI.Leaf()
        early.notBefore = TestAttestationPKI.now.addingTimeInterval(60)
        #expect(throws: CTAP2Error(.untrustedAttestation)) { _ = try verify(try response([pki.leaf(early)]), anchors: anchors) }

        let shortRoot = TestAttestationPKI(rootNotAfter: TestAttestationPKI.now.addingTimeInterval(-1))
        let rootReason = failure(.untrustedAttestation) {
            _ = try verify(
                try MakeCredentialResponse.packedFull(
                    authData: try credential.authData(aaguid: TestAttestationPKI.aaguid), clientDataHash: hash,
                    attestationKey: shortRoot.attestationKey, x5c: [TestAttestationPKI.der(shortRoot.leaf())]),
                anchors: try AttestationTrustAnchors(pem: shortRoot.rootPEM))
        }
        #expect(rootReason.contains("the trusted root expired"), "\(rootReason)")
        // The same chain at a time inside every validity verifies.
        #expect(try verify(good, anchors: anchors, now: TestAttestationPKI.now.addingTimeInterval(86_400)).isTrusted)
    }

    @Test("tampering: every sig byte flipped, authData flipped, another key's signature → invalidSignature")
    func tamper() throws {
        let good = try response([pki.leaf()])
        guard case .packed(let alg, let sig, let x5c) = try good.attestationStatement() else {
            Issue.record("not packed")
            return
        }
        for index in sig.indices {
            var flipped = sig
            flipped[index] ^= 0x01
            var tampered = good
            tampered.attStmt = AttestationStatement.packed(alg: alg, sig: flipped, x5c: x5c).attStmt
            #expect(throws: CTAP2Error(.invalidSignature), "sig byte \(index)") { _ = try verify(tampered) }
        }
        #expect(throws: CTAP2Error(.invalidSignature)) {
            _ = try good.verifyAttestation(clientDataHash: Array(repeating: 0, count: 32), trustAnchors: nil, now: TestAttestationPKI.now)
        }
        // Signed by the credential key (self attestation's key) but claiming the certificate.
        let selfSigned = try MakeCredentialResponse.packedSelf(
            authData: try credential.authData(aaguid: TestAttestationPKI.aaguid), clientDataHash: hash,
            privateKey: credential.privateKey)
        var mixed = selfSigned
        mixed.attStmt["x5c"] = good.attStmt["x5c"]
        #expect(throws: CTAP2Error(.invalidSignature)) { _ = try verify(mixed) }
    }

    @Test("malformed x5c: empty, not a certificate, alg not ES256, a non-P-256 key")
    func malformed() throws {
        let good = try response([pki.leaf()])
        var empty = good
        empty.attStmt["x5c"] = .array([])
        #expect(throws: CTAP2Error(.invalidAttestation)) { _ = try verify(empty) }
        var garbage = good
        garbage.attStmt["x5c"] = .array([.bytes([0x30, 0x00])])
        #expect(throws: CTAP2Error(.invalidAttestation)) { _ = try verify(garbage) }
        // The first entry that is no certificate is named by its index.
        var secondBad = good
        secondBad.attStmt["x5c"] = .array([.bytes(TestAttestationPKI.der(pki.leaf())), .bytes([0x30, 0x00])])
        let named = failure(.invalidAttestation) { _ = try verify(secondBad) }
        #expect(named.hasPrefix("packed x5c[1] is not an X.509 certificate"), "\(named)")
        var rs256 = good
        rs256.attStmt["alg"] = -257
        #expect(throws: CTAP2Error(.unsupportedAlgorithm)) { _ = try verify(rs256) }

        let p384 = P384.Signing.PrivateKey()
        let name = pki.root.subject
        let p384Leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(p384.publicKey),
            notValidBefore: TestAttestationPKI.now.addingTimeInterval(-60), notValidAfter: TestAttestationPKI.now.addingTimeInterval(60),
            issuer: name, subject: name, signatureAlgorithm: .ecdsaWithSHA256, extensions: .init(),
            issuerPrivateKey: .init(pki.rootKey))
        var p384Response = good
        p384Response.attStmt["x5c"] = .array([.bytes(TestAttestationPKI.der(p384Leaf))])
        let reason = failure(.unsupportedAlgorithm) { _ = try verify(p384Response) }
        #expect(reason.contains("not a P-256 key"), "\(reason)")
    }

    @Test("trust anchors: PEM with several roots, a non-certificate block, garbage, nothing")
    func anchors() throws {
        let other = TestAttestationPKI()
        let both = try AttestationTrustAnchors(pem: other.rootPEM + "\n" + pki.rootPEM)
        #expect(both.count == 2)
        #expect(try verify(try response([pki.leaf()]), anchors: both).isTrusted)
        #expect(throws: CTAP2Error(.invalidValue)) { _ = try AttestationTrustAnchors(pem: "") }
        #expect(throws: CTAP2Error(.invalidValue)) { _ = try AttestationTrustAnchors(pem: "not pem") }
        let key = try! Certificate.PrivateKey(pki.rootKey).serializeAsPEM().pemString
        #expect(throws: CTAP2Error(.invalidValue)) { _ = try AttestationTrustAnchors(pem: key) }
        #expect(throws: CTAP2Error(.invalidValue)) { _ = try AttestationTrustAnchors(derEncodedRoots: [[0x30, 0x00]]) }
        do {
            _ = try AttestationTrustAnchors(derEncodedRoots: [TestAttestationPKI.der(pki.root), [0x30, 0x00]])
            Issue.record("a second root that is no certificate was accepted")
        } catch {
            #expect(error.code == .invalidValue)
            #expect(error.reason.hasPrefix("attestation trust anchor 2 is not an X.509 certificate"), "\(error)")
        }
    }
}
