import CTAP2
import HybridTestSupport
import Testing

/// Bounded, seeded robustness runs: every parser must throw its typed error or succeed on mutated
/// and random input, never trap or hang. Deterministic (SplitMix64 seeds), a few seconds in total.
@Suite("Robustness")
struct RobustnessTests {
    /// Inputs fed to `CBOR.decode`.
    static let cborInputs = 50_000
    /// Inputs fed to each CTAP2 message parser (half byte-level mutations, half structural for CBOR
    /// parsers); the framing and getInfo parsers, which reuse the same decoders, get fewer.
    static let parserInputs = 20_000
    static let extraParserInputs = 5_000

    /// A parser under test: seed inputs, and a closure that parses and reports the outcome.
    struct Target: Sendable, CustomTestStringConvertible {
        let name: String
        let kinds: Set<String>
        /// Parses bytes; `nil` means accepted, otherwise the error code.
        let parseBytes: @Sendable ([UInt8]) -> CTAP2Error.Code?
        /// Parses a CBOR value (nil for non-CBOR parsers).
        let parseValue: (@Sendable (CBORValue) -> CTAP2Error.Code?)?
        /// How many inputs to feed.
        var inputs = RobustnessTests.parserInputs
        var testDescription: String { name }

        var corpus: [[UInt8]] {
            CTAP2Case.all.filter { kinds.contains($0.kind) }.map(\.bytes)
        }
    }

    static func outcome(_ body: () throws(CTAP2Error) -> Void) -> CTAP2Error.Code? {
        do {
            try body()
            return nil
        } catch {
            return error.code
        }
    }

    static let targets: [Target] = [
        Target(
            name: "AuthenticatorData", kinds: ["authenticatorData"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try AuthenticatorData(bytes: b).bytes } }, parseValue: nil),
        Target(
            name: "MakeCredentialResponse", kinds: ["makeCredentialResponse"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try MakeCredentialResponse(bytes: b).verifyAttestation(clientDataHash: []) } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try MakeCredentialResponse(cbor: v).verifyAttestation(clientDataHash: []) } }),
        Target(
            name: "GetAssertionResponse", kinds: ["getAssertionResponse"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try GetAssertionResponse(bytes: b).encode() } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try GetAssertionResponse(cbor: v).encode() } }),
        Target(
            name: "GetAssertionRequest", kinds: ["getAssertionRequest"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try GetAssertionRequest(bytes: b).encode() } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try GetAssertionRequest(cbor: v).encode() } }),
        Target(
            name: "MakeCredentialRequest", kinds: ["makeCredentialRequest"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try MakeCredentialRequest(bytes: b).encode() } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try MakeCredentialRequest(cbor: v).encode() } }),
        Target(
            name: "AuthenticatorGetInfoResponse", kinds: ["getInfoResponse"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try AuthenticatorGetInfoResponse(bytes: b).encode() } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try AuthenticatorGetInfoResponse(cbor: v).encode() } },
            inputs: extraParserInputs),
        Target(
            name: "COSEKey", kinds: ["coseKey"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try COSEKey(bytes: b).encode() } },
            parseValue: { v in outcome { () throws(CTAP2Error) in _ = try COSEKey(cbor: v).encode() } }),
        Target(
            name: "CollectedClientData", kinds: ["clientData"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try CollectedClientData(json: b).json } }, parseValue: nil),
        Target(
            name: "CTAP2Request", kinds: ["ctap2Request"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try CTAP2Request(bytes: b).encode() } }, parseValue: nil,
            inputs: extraParserInputs),
        Target(
            name: "CTAP2Response", kinds: ["ctap2Response"],
            parseBytes: { b in outcome { () throws(CTAP2Error) in _ = try CTAP2Response(bytes: b).encode() } }, parseValue: nil,
            inputs: extraParserInputs),
    ]

    @Test("CBOR.decode: mutated and random inputs throw CBORError or decode", .timeLimit(.minutes(1)))
    func cborDecode() throws {
        let corpus = CBORCase.positive.map(\.bytes) + CTAP2Case.positive.filter { $0.kind != "clientData" }.map(\.bytes)
        #expect(corpus.count > 50)
        var mutator = Mutator(seed: 0xC0B0_2026, corpus: corpus)
        var accepted = 0
        var codes: [CBORError.Code: Int] = [:]
        for _ in 0..<Self.cborInputs {
            let input = mutator.next()
            do {
                let value = try CBOR.decode(input)
                accepted += 1
                // Whatever decodes strictly is canonical, so it must re-encode to the input.
                #expect(CBOR.encode(value) == input, "\(Hex.encode(input))")
            } catch {
                codes[error.code, default: 0] += 1
            }
        }
        #expect(accepted > 100)
        #expect(codes.count >= 8, "only saw \(codes)")
    }

    @Test("CTAP2 parsers: mutated and random inputs throw CTAP2Error or parse", .timeLimit(.minutes(1)),
        arguments: targets)
    func parser(_ target: Target) throws {
        let corpus = target.corpus
        #expect(!corpus.isEmpty)
        let seed = target.name.utf8.reduce(UInt64(1469598103934665603)) { ($0 ^ UInt64($1)) &* 1099511628211 }
        var bytesMutator = Mutator(seed: seed, corpus: corpus)
        var valueMutator = CBORValueMutator(seed: seed ^ 0xFFFF)
        let values = corpus.compactMap { try? CBOR.decode($0) }
        var accepted = 0
        var codes: [CTAP2Error.Code: Int] = [:]
        for index in 0..<target.inputs {
            let outcome: CTAP2Error.Code?
            if let parseValue = target.parseValue, !values.isEmpty, index % 2 == 1 {
                var value = values[index / 2 % values.count]
                for _ in 0...(index % 3) { value = valueMutator.mutate(value) }
                outcome = parseValue(value)
            } else {
                outcome = target.parseBytes(bytesMutator.next())
            }
            if let outcome { codes[outcome, default: 0] += 1 } else { accepted += 1 }
        }
        #expect(accepted + codes.values.reduce(0, +) == target.inputs)
        #expect(codes.count >= 2, "only saw \(codes)")
    }

    @Test("the seeded generator is deterministic and the mutator covers every mutation")
    func generator() {
        var a = SeededGenerator(seed: 42)
        var b = SeededGenerator(seed: 42)
        #expect((0..<100).map { _ in a.next() } == (0..<100).map { _ in b.next() })
        var zero = SeededGenerator(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)  // SplitMix64 reference output for seed 0
        var mutator = Mutator(seed: 1, corpus: [[1, 2, 3, 4, 5, 6, 7, 8], [9, 10]])
        for mutation in Mutator.Mutation.allCases {
            for _ in 0..<20 { _ = mutator.mutate([1, 2, 3], with: mutation) }
            _ = mutator.mutate([], with: mutation)
        }
        #expect(mutator.mutate([1, 2, 3], with: .truncate).count <= 3)
        #expect(mutator.mutate([1, 2, 3], with: .insert).count > 3)
    }
}
