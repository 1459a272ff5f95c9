/// The version `hybrid-sim --version` prints: the project's wave (0.1 the first, 0.2 the second:
/// linked phones, relying parties' HTTP flows, tolerance, speed, hostile input, the inspector).
/// Bug reports and recordings name it; the protocol revision it speaks is fixed (CTAP 2.2 hybrid).
public enum HybridSimVersion {
    /// `MAJOR.MINOR.PATCH`.
    public static let number = "0.2.0"

    /// What `--version` prints.
    public static let description = "\(number) (FIDO CTAP 2.2 hybrid transport, caBLE v2)"
}
