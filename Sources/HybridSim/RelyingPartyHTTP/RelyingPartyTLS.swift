import AsyncHTTPClient
import Foundation
import NIOSSL

/// The TLS side of `desktop --rp-url https://…`: which certificates it trusts (`--rp-ca`,
/// `SSL_CERT_FILE`) and what a failed handshake means, in words rather than BoringSSL's error
/// stack (Docs/RELYING_PARTY.md, "TLS").
package enum RelyingPartyTLS {
    /// The client's TLS configuration: the system's trust roots, plus the certificates of `caFile`
    /// (`--rp-ca`); without it, `SSL_CERT_FILE` from `environment` replaces the system's roots, as
    /// OpenSSL's tools take it. `nil`: neither, AsyncHTTPClient's default.
    ///
    /// - Throws: ``ProgramFailure`` `badInput` for a file that is missing, unreadable, or holds no
    ///   PEM certificate (checked at start: the command line's mistake, exit 64).
    package static func configuration(caFile: String?, environment: [String: String]) throws(ProgramFailure) -> TLSConfiguration? {
        if let caFile {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.additionalTrustRoots = [.certificates(try certificates(in: caFile, source: "--rp-ca \(caFile)"))]
            return configuration
        }
        if let file = environment["SSL_CERT_FILE"], !file.isEmpty {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .certificates(try certificates(in: file, source: "SSL_CERT_FILE=\(file)"))
            return configuration
        }
        return nil
    }

    /// The PEM certificates in `path` (at least one).
    static func certificates(in path: String, source: String) throws(ProgramFailure) -> [NIOSSLCertificate] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw ProgramFailure(.badInput, "\(source): no such file")
        }
        guard !isDirectory.boolValue else {
            throw ProgramFailure(.badInput, "\(source) is a directory: give a PEM file of CA certificates")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ProgramFailure(.badInput, "\(source) cannot be read (permission denied?)")
        }
        guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw ProgramFailure(
                .badInput, "\(source) holds no PEM certificate (-----BEGIN CERTIFICATE-----): give the CA's certificate in PEM")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw ProgramFailure(.badInput, "\(source) holds a certificate that cannot be read: not valid PEM")
        }
        guard !certificates.isEmpty else {
            throw ProgramFailure(.badInput, "\(source) holds no PEM certificate that can be read")
        }
        return certificates
    }

    /// A TLS failure in words, naming `host` and the remedy; `nil` when `error` is not one.
    package static func reason(_ error: any Error, host: String) -> String? {
        if let error = error as? HTTPClientError, error == .tlsHandshakeTimeout {
            return "the TLS handshake with \(host) did not finish in time"
        }
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return "the certificate of \(host) does not name \(host) (hostname mismatch): use the name it was issued for"
        }
        guard error is NIOSSLError || error is BoringSSLError else { return nil }
        let text = "\(error)"
        if text.contains("CERTIFICATE_VERIFY_FAILED") {
            return "the certificate of \(host) is not trusted (CERTIFICATE_VERIFY_FAILED): pass its CA with --rp-ca FILE or add it to the system store"
        }
        if text.contains("WRONG_VERSION_NUMBER") {
            return "the server does not speak TLS on this port (WRONG_VERSION_NUMBER): use http://"
        }
        if let code = boringSSLCode(in: text) {
            return "the TLS handshake with \(host) failed (\(code))"
        }
        return "the TLS handshake with \(host) failed"
    }

    /// The reason code of BoringSSL's first error (`…:OPENSSL_internal:CODE at …`).
    static func boringSSLCode(in text: String) -> String? {
        guard let marker = text.range(of: "OPENSSL_internal:") else { return nil }
        let code = text[marker.upperBound...].prefix { $0.isUppercase || $0.isNumber || $0 == "_" }
        return code.isEmpty ? nil : String(code)
    }
}
