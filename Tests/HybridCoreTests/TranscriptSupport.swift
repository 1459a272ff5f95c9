import CTAP2
import Crypto
import HybridCore
import HybridTestSupport
import Testing

/// Replays a Noise trace operation by operation on one `SymmetricState` per party and checks the
/// state after every step, so a divergence is reported at the first step that differs.
func replay(trace: [TraceStep]) throws {
    var states: [String: SymmetricState] = [:]
    for (index, step) in trace.enumerated() {
        let input = step.input.map(hex) ?? []
        var state = states[step.party] ?? SymmetricState(protocolName: [UInt8](repeating: 0, count: 32))
        let label = "step \(index) (\(step.party): \(step.step))"
        if step.step == "init" {
            state = SymmetricState(protocolName: hex(step.h_after))
        } else if step.step.hasPrefix("MixHash") {
            state.mixHash(input)
        } else if step.step.hasPrefix("MixKeyAndHash") {
            state.mixKeyAndHash(input)
        } else if step.step.hasPrefix("MixKey") {
            state.mixKey(input)
        } else if step.step.hasPrefix("EncryptAndHash") {
            let ciphertext = state.encryptAndHash([])
            #expect(Hex.encode(ciphertext) == step.output, "\(label): ciphertext")
        } else if step.step.hasPrefix("DecryptAndHash") {
            let plaintext = try state.decryptAndHash(input)
            #expect(plaintext.isEmpty, "\(label): payload")
        } else {
            Issue.record("\(label): unknown trace operation")
        }
        #expect(Hex.encode(state.handshakeHash) == step.h_after, "\(label): h")
        #expect(Hex.encode(state.chainingKey) == step.ck_after, "\(label): ck")
        if let k = step.k_after {
            #expect(state.cipherKey.map { Hex.encode($0) } == k, "\(label): k")
        }
        states[step.party] = state
    }
}

/// A P-256 key-agreement key from a transcript's 32-byte private scalar.
func keyAgreementKey(_ scalarHex: String) throws -> P256.KeyAgreement.PrivateKey {
    try P256.KeyAgreement.PrivateKey(rawRepresentation: hex(scalarHex))
}
