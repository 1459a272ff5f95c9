import Crypto
import Foundation
import HybridCore
import HybridQR

/// Known inputs and random payload builders shared by the QR tests.
enum Fixtures {
    /// A real desktop QR code from Chrome (Oct 2022): 69-byte CBOR, 168 digits.
    /// Source: kanidm/webauthn-rs `webauthn-authenticator-rs/src/cable/handshake.rs` test
    /// `decode_chrome`; the same URL is the first vector of `Vectors/qr.json`.
    static let chromeURL =
        "FIDO:/162870791865632382552704231438327900152302540348097243854039966655366469794954476199158014113179232779520163209900691930075274801398564434658077048963842109321447142660"

    /// A real QR code from Safari on iOS (Dec 2022), same source (`decode_safari_ios`, the second vector
    /// of `Vectors/qr.json`).
    static let safariURL =
        "FIDO:/089962132878132862898875319509818655951233947060166026934941652203853844930597225184066237811614893181300344014421205790072080843938838513707157859599106109321447142404"

    /// A fresh payload: random P-256 identity key and secret, and a mix of the optional keys
    /// chosen by `variant` (so a loop covers every combination).
    static func randomPayload(variant: Int) -> QRPayload {
        let key = P256.KeyAgreement.PrivateKey().publicKey.compressedRepresentation
        let secret = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let linking: [Bool?] = [nil, true, false]
        return QRPayload(
            compressedPublicKey: Array(key),
            secret: secret,
            knownDomainCount: variant % 5 == 4 ? UInt64.random(in: 0...70_000) : 2,
            timestamp: variant % 2 == 0 ? UInt64.random(in: 1_600_000_000...2_000_000_000) : nil,
            supportsLinking: linking[variant % 3],
            requestType: variant % 4 < 2 ? .getAssertion : .makeCredential
        )
    }

    /// A fresh temporary directory, removed by the caller with ``removeDirectory(_:)``.
    static func makeTemporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory
            .appendingPathComponent("hybridqr-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Removes a directory made by ``makeTemporaryDirectory()``, ignoring errors.
    static func removeDirectory(_ url: URL) {
        try? FileManager.default.removeItem(at: url)
    }

    /// Terminal art as `tmux capture-pane -p` returns it: trailing spaces removed on every line.
    static func strippingTrailingSpaces(_ art: String) -> String {
        art.split(separator: "\n", omittingEmptySubsequences: false)
            .map { line in String(line.reversed().drop(while: { $0 == " " }).reversed()) }
            .joined(separator: "\n")
    }
}
