import HybridCore
import HybridFiles

/// `phone --attestation-root-out FILE`: the simulated attestation root CA that
/// `--attestation packed-x5c` certificates chain to, as PEM, for a relying party's
/// `--attestation-roots` (Docs/CLI.md). The root is the same CA in every run
/// (``SimulatedAttestationCA``), so the file can be written once, before any desktop starts.
package enum PhoneAttestationRoot {
    /// Writes the root PEM to `path` (replacing the file; `/dev/stdout` is written as it is).
    ///
    /// - Throws: ``ProgramFailure`` when the file cannot be written: `failed` (exit 1) when the
    ///   machine failed (no space left, an I/O error: ``FileFailure/failureKind``), else `badInput`.
    package static func write(to path: String) throws(ProgramFailure) {
        do {
            try FileWriter.replacePrivately(path, with: Array(SimulatedAttestationCA.rootPEM().utf8))
        } catch {
            throw ProgramFailure(error.failureKind, "cannot write --attestation-root-out \(path): \(error)")
        }
    }
}
