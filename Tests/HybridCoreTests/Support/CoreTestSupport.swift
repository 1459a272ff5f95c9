import Crypto
import HybridCore
import HybridTestSupport
import Testing

// Helpers shared by the unit tests of HybridCore. Names are prefixed or specific enough not to
// collide with the transcript tests' helpers in the same target.

/// The `HybridError` a vector's `"expectError"` names (a `HybridError.Code` raw value).
func expectedError(_ name: String?) throws -> HybridError {
    let name = try #require(name, "vector has no expectError")
    let code = try #require(HybridError.Code(rawValue: name), "unknown error code \(name) in a vector")
    return HybridError(code, "")
}

/// A P-256 key-agreement key from a vector's 32-byte private scalar in hex.
func p256PrivateKey(_ scalarHex: String) throws -> P256.KeyAgreement.PrivateKey {
    try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(scalarHex))
}

/// `bytes` with `mask` XOR-ed into the byte at `index`.
func flipping(_ bytes: [UInt8], at index: Int, mask: UInt8 = 0x01) -> [UInt8] {
    var copy = bytes
    copy[index] ^= mask
    return copy
}
