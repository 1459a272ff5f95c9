import Crypto
import CryptoExtras
import Foundation

/// The cost of the cryptography one QR sign-in performs, measured with swift-crypto in this process:
/// the least CPU time a sign-in could take if everything else (sockets, the relay, scheduling,
/// CBOR, the drivers) were free.
///
/// The operation counts are taken from the code of one discoverable getAssertion through
/// ``HybridHarness/signIn(on:relyingParty:knownCredentials:allowCredentials:options:)``, desktop
/// and phone together (both run in the same process); see ``OperationKind`` for where each one
/// happens. Random-byte generation is not counted (it is not swift-crypto), nor are key-object
/// wrappers (`SymmetricKey(data:)`) and point compression, which cost next to nothing.
public struct CryptoFloor: Sendable, Hashable, Codable {
    /// One kind of cryptographic operation and how often a sign-in performs it.
    public enum OperationKind: String, Sendable, Hashable, Codable, CaseIterable {
        /// P-256 private key from a 32-byte scalar, public point computed (scalar·G) and exported:
        /// the desktop's QR identity key (`ClientSession.init`), the desktop's and the phone's Noise
        /// ephemerals (`tunnelConnected`, `receivedMessage`), and the passkey's signing key loaded
        /// for the assertion (`Passkey.signingKey`). 4 per sign-in.
        case keyFromScalar = "p256-key-from-scalar"
        /// Uncompressed (X9.63) P-256 point decoded and validated: each side's view of the other's
        /// Noise ephemeral, and the relying party's credential public key (`COSEKey`). 3.
        case decodeUncompressedPoint = "p256-decode-x963"
        /// Compressed P-256 point decompressed: the phone validating the QR code
        /// (`QRPayload(url:)`), which keeps the point as the desktop's identity (`qr.publicKey`). 1.
        case decodeCompressedPoint = "p256-decode-compressed"
        /// P-256 ECDH: `ee` and `se` on each side of the `KNpsk0` handshake. 4.
        case ecdh = "p256-ecdh"
        /// ES256 signature over authenticator data ‖ client-data hash (SHA-256 included). 1.
        case sign = "es256-sign"
        /// ES256 verification by the relying party (DER parse and SHA-256 included). 1.
        case verify = "es256-verify"
        /// HKDF-SHA256 `Derive()`: EID key (64 bytes), tunnel ID (16) and PSK (32), on each side. 6.
        case deriveHKDF = "hkdf-derive"
        /// HKDF-SHA256 inside Noise: `MixKeyAndHash` (96 bytes), four `MixKey` (64) and `Split` (64),
        /// on each side. 12.
        case noiseHKDF = "hkdf-noise"
        /// SHA-256 of a short input: seven `MixHash` per side, the client-data hash (request and
        /// relying party) and the RP ID hash (authenticator and relying party). 18.
        case sha256 = "sha256-short"
        /// AES-256-GCM seal of a handshake message (empty plaintext, 32-byte handshake hash as
        /// associated data): message 1 and message 2. 2.
        case handshakeSeal = "aes-gcm-seal-handshake"
        /// AES-256-GCM open of a handshake message. 2.
        case handshakeOpen = "aes-gcm-open-handshake"
        /// AES-256-GCM seal of a padded transport message (128 bytes stands for the mix of
        /// post-handshake, update, request, response and shutdown). 5.
        case transportSeal = "aes-gcm-seal-transport"
        /// AES-256-GCM open of a padded transport message. 5.
        case transportOpen = "aes-gcm-open-transport"
        /// One AES-256 block for the advert: the phone encrypts, the desktop decrypts twice (its
        /// scanner's matcher and its session). 3.
        case advertBlock = "aes-block-advert"
        /// HMAC-SHA256 of the advert's 16-byte ciphertext, once per encryption or decryption. 3.
        case advertHMAC = "hmac-sha256-advert"

        /// How many times one sign-in performs it.
        public var perSignIn: Int {
            switch self {
            case .keyFromScalar: return 4
            case .decodeUncompressedPoint: return 3
            case .decodeCompressedPoint: return 1
            case .ecdh: return 4
            case .sign: return 1
            case .verify: return 1
            case .deriveHKDF: return 6
            case .noiseHKDF: return 12
            case .sha256: return 18
            case .handshakeSeal: return 2
            case .handshakeOpen: return 2
            case .transportSeal: return 5
            case .transportOpen: return 5
            case .advertBlock: return 3
            case .advertHMAC: return 3
            }
        }

        /// A short human label.
        public var label: String {
            switch self {
            case .keyFromScalar: return "P-256 key from scalar (k·G)"
            case .decodeUncompressedPoint: return "P-256 point decode (X9.63)"
            case .decodeCompressedPoint: return "P-256 point decompress"
            case .ecdh: return "P-256 ECDH"
            case .sign: return "ES256 sign"
            case .verify: return "ES256 verify"
            case .deriveHKDF: return "HKDF-SHA256 Derive()"
            case .noiseHKDF: return "HKDF-SHA256 Noise MixKey/Split"
            case .sha256: return "SHA-256 (MixHash, hashes)"
            case .handshakeSeal: return "AES-256-GCM seal, handshake"
            case .handshakeOpen: return "AES-256-GCM open, handshake"
            case .transportSeal: return "AES-256-GCM seal, 128 B"
            case .transportOpen: return "AES-256-GCM open, 128 B"
            case .advertBlock: return "AES-256 block (advert)"
            case .advertHMAC: return "HMAC-SHA256 (advert tag)"
            }
        }
    }

    /// The measured cost of one kind of operation.
    public struct Operation: Sendable, Hashable, Codable {
        /// Which operation.
        public var kind: OperationKind
        /// How many one sign-in performs.
        public var perSignIn: Int
        /// Cost of one, in nanoseconds: the median of the rounds' averages.
        public var nanoseconds: Double
        /// Cost of one in the fastest round, in nanoseconds.
        public var fastestNanoseconds: Double
        /// `perSignIn × nanoseconds`.
        public var nanosecondsPerSignIn: Double { Double(perSignIn) * nanoseconds }
    }

    /// Every operation, in ``OperationKind`` order.
    public var operations: [Operation]
    /// Calls timed per operation in each round.
    public var iterations: Int
    /// Rounds timed (each times every operation once, `iterations` calls each).
    public var rounds: Int

    /// The sum of every operation's median cost per sign-in, in nanoseconds: the crypto floor.
    public var floorNanoseconds: Double
    /// The floor from each operation's fastest round, in nanoseconds (the machine at its quietest).
    public var fastestFloorNanoseconds: Double
    /// The floor in milliseconds.
    public var floorMilliseconds: Double { floorNanoseconds / 1e6 }

    /// Collects measured operations; the floors are their sums.
    public init(operations: [Operation], iterations: Int, rounds: Int) {
        self.operations = operations
        self.iterations = iterations
        self.rounds = rounds
        floorNanoseconds = operations.reduce(0) { $0 + $1.nanosecondsPerSignIn }
        fastestFloorNanoseconds = operations.reduce(0) { $0 + Double($1.perSignIn) * $1.fastestNanoseconds }
    }

    /// Times every operation in `rounds` rounds back to back (after one untimed round).
    public static func measure(iterations: Int = 200, rounds: Int = 5) throws -> CryptoFloor {
        precondition(rounds > 0, "rounds must be positive")
        var sampler = try Sampler(iterations: iterations)
        for _ in 0..<rounds { try sampler.round() }
        return sampler.result
    }

    /// Collects rounds of timings, so that they can be spread over a longer run: the benchmark
    /// interleaves them with the sign-ins, so both are measured under the same conditions (on a
    /// shared or virtual machine the CPU's speed can change by a factor of two within seconds).
    public struct Sampler {
        /// Calls timed per operation in each round.
        public let iterations: Int
        private let bodies: [(kind: OperationKind, body: () throws -> UInt8, units: Int)]
        private var perCall: [[Double]]
        private var sink: UInt8 = 0

        /// Prepares the inputs and runs one untimed round (first-use costs, caches).
        public init(iterations: Int = 50) throws {
            precondition(iterations > 0, "iterations must be positive")
            self.iterations = iterations
            let fixtures = try Fixtures()
            bodies = try OperationKind.allCases.map { kind in
                let (body, units) = try fixtures.body(for: kind)
                return (kind, body, units)
            }
            perCall = Array(repeating: [], count: bodies.count)
            for entry in bodies {
                for _ in 0..<iterations { sink ^= try entry.body() }
            }
        }

        /// Times every operation once more: `iterations` calls each.
        public mutating func round() throws {
            for (index, entry) in bodies.enumerated() {
                let start = ContinuousClock.now
                for _ in 0..<iterations { sink ^= try entry.body() }
                let elapsed = (ContinuousClock.now - start).benchmarkNanoseconds
                perCall[index].append(elapsed / Double(iterations * entry.units))
            }
        }

        /// Rounds timed so far.
        public var rounds: Int { perCall.first?.count ?? 0 }

        /// The costs so far: per operation, the median and the fastest of the rounds' averages.
        public var result: CryptoFloor {
            let operations = bodies.indices.map { index in
                let samples = perCall[index].sorted()
                let median = LatencySummary.percentile(50, ofSorted: samples)
                // The sink keeps every result observable so the optimiser cannot drop the work.
                return Operation(
                    kind: bodies[index].kind, perSignIn: bodies[index].kind.perSignIn,
                    nanoseconds: sink == 0x5A ? median.nextUp : median, fastestNanoseconds: samples.first ?? 0)
            }
            return CryptoFloor(operations: operations, iterations: iterations, rounds: rounds)
        }
    }
}

// MARK: - Inputs and the timed bodies

extension CryptoFloor {
    /// Inputs made once, outside the timed loops, shaped like the protocol's.
    fileprivate struct Fixtures {
        let scalars: [[UInt8]]
        let agreementKey = P256.KeyAgreement.PrivateKey()
        let peerKey = P256.KeyAgreement.PrivateKey().publicKey
        let uncompressedPoint: [UInt8]
        let compressedPoint: [UInt8]
        let signingKey = P256.Signing.PrivateKey()
        /// 37 bytes of authenticator data ‖ a 32-byte client-data hash.
        let signedData = [UInt8](repeating: 0xA5, count: 69)
        let signature: [UInt8]
        let secret = [UInt8](repeating: 0x11, count: 16)
        let eidPlaintext = [UInt8](repeating: 0x22, count: 16)
        let chainingKey = [UInt8](repeating: 0x33, count: 32)
        let point = [UInt8](repeating: 0x44, count: 65)
        let aesKey = SymmetricKey(data: [UInt8](repeating: 0x55, count: 32))
        let macKey = SymmetricKey(data: [UInt8](repeating: 0x66, count: 32))
        let nonce: AES.GCM.Nonce
        let handshakeHash = [UInt8](repeating: 0x77, count: 32)
        let transportPlaintext = [UInt8](repeating: 0x88, count: 128)
        let handshakeBox: AES.GCM.SealedBox
        let transportBox: AES.GCM.SealedBox

        init() throws {
            scalars = (0..<16).map { _ in Array(P256.KeyAgreement.PrivateKey().rawRepresentation) }
            uncompressedPoint = Array(peerKey.x963Representation)
            compressedPoint = Array(peerKey.compressedRepresentation)
            signature = Array(try signingKey.signature(for: signedData).derRepresentation)
            nonce = try AES.GCM.Nonce(data: [UInt8](repeating: 0, count: 12))
            handshakeBox = try AES.GCM.seal([UInt8](), using: aesKey, nonce: nonce, authenticating: handshakeHash)
            transportBox = try AES.GCM.seal(transportPlaintext, using: aesKey, nonce: nonce)
        }

        /// One call of the returned closure performs `units` operations of `kind`.
        func body(for kind: OperationKind) throws -> (body: () throws -> UInt8, units: Int) {
            switch kind {
            case .keyFromScalar:
                var index = 0
                let scalars = self.scalars
                return ({
                    index = (index + 1) % scalars.count
                    let key = try P256.KeyAgreement.PrivateKey(rawRepresentation: scalars[index])
                    return key.publicKey.x963Representation.first ?? 0
                }, 1)
            case .decodeUncompressedPoint:
                return ({ try P256.KeyAgreement.PublicKey(x963Representation: uncompressedPoint).rawRepresentation.first ?? 0 }, 1)
            case .decodeCompressedPoint:
                return ({ try P256.KeyAgreement.PublicKey(compressedRepresentation: compressedPoint).rawRepresentation.first ?? 0 }, 1)
            case .ecdh:
                return ({ try agreementKey.sharedSecretFromKeyAgreement(with: peerKey).withUnsafeBytes { $0.first ?? 0 } }, 1)
            case .sign:
                return ({ try signingKey.signature(for: signedData).derRepresentation.first ?? 0 }, 1)
            case .verify:
                let publicKey = signingKey.publicKey
                return ({
                    let parsed = try P256.Signing.ECDSASignature(derRepresentation: signature)
                    return publicKey.isValidSignature(parsed, for: signedData) ? 1 : 0
                }, 1)
            case .deriveHKDF:
                return ({
                    let eid = Self.hkdf(ikm: secret, salt: [], info: [1, 0, 0, 0], count: 64)
                    let tunnel = Self.hkdf(ikm: secret, salt: [], info: [2, 0, 0, 0], count: 16)
                    let psk = Self.hkdf(ikm: secret, salt: eidPlaintext, info: [3, 0, 0, 0], count: 32)
                    return eid ^ tunnel ^ psk
                }, 3)
            case .noiseHKDF:
                return ({
                    var out = Self.hkdf(ikm: chainingKey, salt: chainingKey, info: [], count: 96)
                    out ^= Self.hkdf(ikm: point, salt: chainingKey, info: [], count: 64)
                    out ^= Self.hkdf(ikm: chainingKey, salt: chainingKey, info: [], count: 64)
                    out ^= Self.hkdf(ikm: chainingKey, salt: chainingKey, info: [], count: 64)
                    out ^= Self.hkdf(ikm: point, salt: chainingKey, info: [], count: 64)
                    out ^= Self.hkdf(ikm: [], salt: chainingKey, info: [], count: 64)
                    return out
                }, 6)
            case .sha256:
                return ({
                    var hasher = SHA256()
                    hasher.update(data: handshakeHash)
                    hasher.update(data: point)
                    return hasher.finalize().withUnsafeBytes { $0[0] }
                }, 1)
            case .handshakeSeal:
                return ({
                    let box = try AES.GCM.seal([UInt8](), using: aesKey, nonce: nonce, authenticating: handshakeHash)
                    return box.tag.first ?? 0
                }, 1)
            case .handshakeOpen:
                return ({ try AES.GCM.open(handshakeBox, using: aesKey, authenticating: handshakeHash).count == 0 ? 1 : 0 }, 1)
            case .transportSeal:
                return ({ try AES.GCM.seal(transportPlaintext, using: aesKey, nonce: nonce).tag.first ?? 0 }, 1)
            case .transportOpen:
                return ({ try AES.GCM.open(transportBox, using: aesKey).first ?? 0 }, 1)
            case .advertBlock:
                return ({
                    var block = eidPlaintext
                    try AES.permute(&block, key: aesKey)
                    try AES.inversePermute(&block, key: aesKey)
                    return block[0]
                }, 2)
            case .advertHMAC:
                return ({ HMAC<SHA256>.authenticationCode(for: eidPlaintext, using: macKey).withUnsafeBytes { $0[0] } }, 1)
            }
        }

        private static func hkdf(ikm: [UInt8], salt: [UInt8], info: [UInt8], count: Int) -> UInt8 {
            HKDF<SHA256>.deriveKey(
                inputKeyMaterial: SymmetricKey(data: ikm), salt: salt, info: info, outputByteCount: count
            ).withUnsafeBytes { $0.first ?? 0 }
        }
    }
}
