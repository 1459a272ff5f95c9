import CTAP2

/// Hex decoding for test literals: traps on malformed hex, which is a bug in the test itself.
public func hex(_ string: String) -> [UInt8] {
    do {
        return try Hex.decode(string.filter { !$0.isWhitespace })
    } catch {
        preconditionFailure("malformed hex literal in a test: \(error)")
    }
}
