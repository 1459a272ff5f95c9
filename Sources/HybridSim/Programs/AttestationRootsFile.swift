import CTAP2

/// `--attestation-roots FILE` (desktop and rp): the PEM roots a packed full attestation (`x5c`)
/// must chain to. Read once, before any socket is opened; a bad file is a usage error (exit 2).
package enum AttestationRootsFile {
    /// The trust anchors in the PEM file at `path` (one or more `CERTIFICATE` blocks).
    ///
    /// - Throws: ``ProgramFailure`` `badInput` naming the file and what is wrong with it.
    package static func load(_ path: String) throws(ProgramFailure) -> AttestationTrustAnchors {
        let bytes: [UInt8]
        do {
            bytes = try InputFile.read(path, maximumSize: 1 << 20)
        } catch {
            throw ProgramFailure(.badInput, "cannot read --attestation-roots \(path): \(error)")
        }
        do {
            return try AttestationTrustAnchors(pem: String(decoding: bytes, as: UTF8.self))
        } catch {
            throw ProgramFailure(.badInput, "--attestation-roots \(path) holds no usable root: \(error.reason)")
        }
    }
}
