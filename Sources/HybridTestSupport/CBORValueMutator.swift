import CTAP2

/// Structure-aware mutations of CBOR values, for parsers whose input is a CBOR map: byte-level
/// mutation (``Mutator``) mostly breaks the CBOR itself, while these keep it valid and change the
/// shape instead (a key dropped, a value of another type, an element added, a length changed).
///
/// ```swift
/// var mutator = CBORValueMutator(seed: 7)
/// let value = mutator.mutate(validRequest.cbor)
/// _ = try? GetAssertionRequest(cbor: value)
/// ```
public struct CBORValueMutator: Sendable {
    /// The random source; its state advances with every call.
    public var generator: SeededGenerator

    /// Creates a mutator.
    public init(seed: UInt64) {
        generator = SeededGenerator(seed: seed)
    }

    /// `value` with one change somewhere in its tree.
    public mutating func mutate(_ value: CBORValue) -> CBORValue {
        switch value {
        case .map(var entries) where !entries.isEmpty:
            let keys = CBOR.canonicallySorted(entries).map(\.key)  // a stable order keeps runs reproducible
            let key = keys[random(keys.count)]
            switch random(5) {
            case 0: entries[key] = nil
            case 1: entries[key] = randomValue(depth: 0)
            case 2: entries[randomKey()] = randomValue(depth: 0)
            default: entries[key] = mutate(entries[key] ?? .null)
            }
            return .map(entries)
        case .array(var elements) where !elements.isEmpty:
            let index = random(elements.count)
            switch random(4) {
            case 0: elements.remove(at: index)
            case 1: elements.append(randomValue(depth: 0))
            default: elements[index] = mutate(elements[index])
            }
            return .array(elements)
        case .bytes(var bytes) where !bytes.isEmpty && random(2) == 0:
            switch random(3) {
            case 0: bytes.removeLast()
            case 1: bytes.append(UInt8(truncatingIfNeeded: generator.next()))
            default: bytes[random(bytes.count)] ^= UInt8(1) << UInt8(random(8))
            }
            return .bytes(bytes)
        default:
            return randomValue(depth: 0)
        }
    }

    /// A random value: integers near boundaries, byte strings of protocol sizes, short text,
    /// booleans, null, and small arrays and maps (up to depth 2).
    public mutating func randomValue(depth: Int) -> CBORValue {
        let choices = depth >= 2 ? 7 : 9
        switch random(choices) {
        case 0: return .unsigned([0, 1, 2, 3, 23, 24, 255, 256, 65536, UInt64.max][random(10)])
        case 1: return .negative([0, 6, 7, 256, UInt64.max][random(5)])
        case 2: return .bytes(generator.bytes([0, 1, 15, 16, 31, 32, 33, 64, 65][random(9)]))
        case 3: return .text(["", "a", "public-key", "id", "type", "webauthn.get", "é"][random(7)])
        case 4: return .bool(random(2) == 0)
        case 5: return .null
        case 6: return .undefined
        case 7: return .array((0..<random(3)).map { _ in randomValue(depth: depth + 1) })
        default:
            var entries: [CBORValue: CBORValue] = [:]
            for _ in 0..<random(3) { entries[randomKey()] = randomValue(depth: depth + 1) }
            return .map(entries)
        }
    }

    private mutating func randomKey() -> CBORValue {
        switch random(3) {
        case 0: return .unsigned(UInt64(random(12)))
        case 1: return .negative(UInt64(random(4)))
        default: return .text(["id", "type", "name", "alg", "sig", "x5c", "rk", "uv", "up"][random(9)])
        }
    }

    private mutating func random(_ upperBound: Int) -> Int {
        guard upperBound > 0 else { return 0 }
        return Int(generator.next() % UInt64(upperBound))
    }
}
