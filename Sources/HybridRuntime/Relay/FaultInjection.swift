/// Fault injection in the relay (`hybrid-sim relay --fault …`, `desktop --relay-fault …`): rules that
/// drop, delay, duplicate, corrupt, reorder, truncate tunnel messages or close the tunnel, so people
/// can test a client or an authenticator against a misbehaving tunnel service (Docs/FAULTS.md).
///
/// This file is the pure part: the rule grammar and the seeded decision of what happens to each
/// message. ``FaultInjectionHandler`` applies the decisions on the relay's event loop.

/// The party a tunnel message travels to.
package enum FaultRecipient: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The authenticator (the tunnel's creator in the QR flow, its joiner in the linked flow).
    case phone
    /// The client (the tunnel's joiner in the QR flow, its creator in the linked flow).
    case desktop

    package var description: String { rawValue }
}

/// One fault rule: `MODE[=VALUE][:RATE][@DIRECTION][#N]`.
///
/// - `MODE`: `drop`, `delay`, `duplicate`, `corrupt`, `reorder`, `truncate`, `close`.
/// - `VALUE`: `delay=DURATION` (how long; default 200ms), `reorder=DURATION` (how long a message is
///   held back waiting for the next one to overtake it; default 500ms), `truncate=BYTES` (bytes
///   kept; default half the message), `close=CODE` (the close code; default 1011). Durations are
///   `<number>ms` or `<number>s`, at most 60 s. `drop`, `duplicate` and `corrupt` take no value.
/// - `RATE`: the probability (0…1) that a matching message is hit; default 1.
/// - `DIRECTION`: `to-phone`, `to-desktop` or `both` (default).
/// - `N`: only the N-th message (1-based) in each matching direction.
public struct RelayFault: Sendable, Hashable, CustomStringConvertible {
    /// What the fault does to a message.
    public enum Mode: String, Sendable, Hashable, CaseIterable {
        /// The message is not forwarded.
        case drop
        /// The message (and every message after it in the same direction) is held for a while.
        case delay
        /// The message is forwarded twice.
        case duplicate
        /// One bit of one byte of the message is flipped.
        case corrupt
        /// The message is held until the next message in the same direction has been forwarded.
        case reorder
        /// The message is cut short.
        case truncate
        /// Instead of forwarding the message the relay closes the tunnel (both peers get the code).
        case close
    }

    /// Which messages a rule applies to, by their recipient.
    public enum Direction: String, Sendable, Hashable, CaseIterable {
        /// Messages the relay forwards to the phone (`to-phone`).
        case toPhone = "to-phone"
        /// Messages the relay forwards to the desktop (`to-desktop`).
        case toDesktop = "to-desktop"
        /// Messages in either direction (`both`).
        case both

        /// Whether a message to `recipient` matches.
        package func matches(_ recipient: FaultRecipient) -> Bool {
            switch self {
            case .both: return true
            case .toPhone: return recipient == .phone
            case .toDesktop: return recipient == .desktop
            }
        }
    }

    /// Default `delay` duration.
    public static let defaultDelay: Duration = .milliseconds(200)
    /// Default `reorder` hold.
    public static let defaultReorderHold: Duration = .milliseconds(500)
    /// Default `close` code: 1011 (internal error).
    public static let defaultCloseCode: UInt16 = 1011
    /// Longest `delay` or `reorder` duration.
    public static let maximumDuration: Duration = .seconds(60)

    /// What the rule does.
    public var mode: Mode
    /// Probability (0…1) that a matching message is hit.
    public var rate: Double
    /// Which messages the rule applies to.
    public var direction: Direction
    /// Only this message number (1-based) in each matching direction; `nil`: every message.
    public var messageNumber: Int?
    /// `delay`: how long; `reorder`: the longest hold.
    public var duration: Duration
    /// `truncate`: bytes kept; `nil`: half of the message.
    public var keptBytes: Int?
    /// `close`: the close code sent to both peers.
    public var closeCode: UInt16

    /// A rule from its parts (defaults as in the grammar).
    public init(
        _ mode: Mode, rate: Double = 1, direction: Direction = .both, messageNumber: Int? = nil,
        duration: Duration? = nil, keptBytes: Int? = nil, closeCode: UInt16 = RelayFault.defaultCloseCode
    ) {
        self.mode = mode
        self.rate = rate
        self.direction = direction
        self.messageNumber = messageNumber
        self.duration = duration ?? (mode == .reorder ? Self.defaultReorderHold : Self.defaultDelay)
        self.keptBytes = keptBytes
        self.closeCode = closeCode
    }

    /// A rule written as `MODE[=VALUE][:RATE][@DIRECTION][#N]`.
    ///
    /// - Throws: ``RelayFault/ParseError`` naming what is wrong.
    public init(parsing text: String) throws(ParseError) {
        func bad(_ why: String) -> ParseError { ParseError(spec: text, why: why) }
        /// Decimal digits only, but beyond `Int`: a number too large, not a malformed one.
        func overflows(_ digits: Substring) -> Bool {
            !digits.isEmpty && digits.allSatisfy { $0.isASCII && $0.isNumber } && Int(digits) == nil
        }
        var rest = Substring(text)
        var number: Int?
        if let hash = rest.lastIndex(of: "#") {
            let digits = rest[rest.index(after: hash)...]
            if overflows(digits) {
                throw bad("#N is too large: '\(digits)' is beyond any message number (at most \(Int.max))")
            }
            guard let value = Int(digits), value >= 1, digits.allSatisfy(\.isASCII) else {
                throw bad("#N must be a message number of at least 1, not '\(digits)'")
            }
            number = value
            rest = rest[..<hash]
        }
        var direction = Direction.both
        if let at = rest.lastIndex(of: "@") {
            let name = String(rest[rest.index(after: at)...])
            guard let value = Direction(rawValue: name) else {
                throw bad("direction must be to-phone, to-desktop or both, not '\(name)'")
            }
            direction = value
            rest = rest[..<at]
        }
        var rate = 1.0
        if let colon = rest.lastIndex(of: ":") {
            let written = rest[rest.index(after: colon)...]
            guard let value = Double(written), value >= 0, value <= 1, written.allSatisfy({ $0.isNumber || $0 == "." }) else {
                throw bad("rate must be a probability from 0 to 1 such as 0.25, not '\(written)'")
            }
            rate = value
            rest = rest[..<colon]
        }
        var value: Substring?
        if let equals = rest.firstIndex(of: "=") {
            value = rest[rest.index(after: equals)...]
            rest = rest[..<equals]
        }
        guard let mode = Mode(rawValue: String(rest)) else {
            throw bad("unknown fault '\(rest)'; one of \(Mode.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        self.init(mode, rate: rate, direction: direction, messageNumber: number)
        guard let value else { return }
        switch mode {
        case .delay, .reorder:
            guard let duration = Self.parseDuration(value) else {
                throw bad("\(mode)=DURATION takes a duration such as 200ms or 1.5s, at most 60s, not '\(value)'")
            }
            self.duration = duration
        case .truncate:
            if overflows(value) {
                throw bad("truncate=BYTES is too large: '\(value)' (at most \(Int.max); a count of at least a message's length keeps it whole)")
            }
            guard let kept = Int(value), kept >= 0, value.allSatisfy(\.isASCII) else {
                throw bad("truncate=BYTES takes the number of bytes kept (0 or more), not '\(value)'")
            }
            keptBytes = kept
        case .close:
            guard let code = UInt16(value), WebSocketCloseCode(rawValue: code).isSendable else {
                throw bad(
                    "close=CODE takes a WebSocket close code an endpoint may send (1000-1003, 1007-1014, 3000-4999), not '\(value)'"
                )
            }
            closeCode = code
        case .drop, .duplicate, .corrupt:
            throw bad("\(mode) takes no value")
        }
    }

    /// Why a fault rule could not be parsed.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The rule as written.
        public var spec: String
        /// What is wrong with it.
        public var why: String

        public var description: String {
            "invalid fault '\(spec)': \(why) (syntax: MODE[=VALUE][:RATE][@to-phone|@to-desktop|@both][#N])"
        }
    }

    /// The rule in its canonical written form (defaults left out).
    public var description: String {
        var text = mode.rawValue
        switch mode {
        case .delay where duration != Self.defaultDelay: text += "=\(Self.format(duration))"
        case .reorder where duration != Self.defaultReorderHold: text += "=\(Self.format(duration))"
        case .truncate: if let keptBytes { text += "=\(keptBytes)" }
        case .close where closeCode != Self.defaultCloseCode: text += "=\(closeCode)"
        default: break
        }
        if rate != 1 { text += ":\(rate)" }
        if direction != .both { text += "@\(direction.rawValue)" }
        if let messageNumber { text += "#\(messageNumber)" }
        return text
    }

    /// `200ms`, `1.5s`: a positive duration of at most ``maximumDuration``.
    static func parseDuration(_ text: Substring) -> Duration? {
        let (number, scale): (Substring, Double) =
            text.hasSuffix("ms") ? (text.dropLast(2), 1e-3) : text.hasSuffix("s") ? (text.dropLast(), 1) : ("", 0)
        guard !number.isEmpty, number.allSatisfy({ $0.isNumber || $0 == "." }), let value = Double(number) else {
            return nil
        }
        let seconds = value * scale
        guard seconds > 0, seconds <= 60 else { return nil }
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    static func format(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000)s" : "\(milliseconds)ms"
    }
}

/// The fault rules of a relay and their seed (``RelayConfiguration/faults``).
public struct RelayFaults: Sendable, Hashable {
    /// The rules, applied in this order; none (the default) disables fault injection.
    public var rules: [RelayFault]
    /// `--fault-seed`: every tunnel uses this seed, so a run is reproducible; `nil`: each tunnel
    /// gets a seed derived from its tunnel ID (logged, so a failure can be replayed).
    public var seed: UInt64?

    /// Rules and a seed.
    public init(_ rules: [RelayFault] = [], seed: UInt64? = nil) {
        self.rules = rules
        self.seed = seed
    }

    /// Parses `--fault` values.
    public init(parsing specs: [String], seed: UInt64? = nil) throws(RelayFault.ParseError) {
        var rules: [RelayFault] = []
        for spec in specs { rules.append(try RelayFault(parsing: spec)) }
        self.init(rules, seed: seed)
    }

    /// Whether any rule is set.
    public var isEnabled: Bool { !rules.isEmpty }

    /// The seed of the tunnel with `tunnelID`: ``seed`` if set, else one mixed from the tunnel ID.
    package func seed(forTunnel tunnelID: [UInt8]) -> UInt64 {
        if let seed { return seed }
        var state: UInt64 = 0x6661_756C_7473  // "faults"
        for byte in tunnelID { state = FaultDecision.mix(state ^ UInt64(byte)) }
        return state
    }

    /// What happens to message `number` (1-based, counted per direction) of `length` bytes travelling
    /// to `recipient` in a tunnel with `seed`. Pure: the same inputs always give the same decision.
    package func decide(seed: UInt64, recipient: FaultRecipient, number: Int, length: Int) -> FaultDecision {
        var decision = FaultDecision()
        for (index, rule) in rules.enumerated() {
            guard rule.direction.matches(recipient), rule.messageNumber.map({ $0 == number }) ?? true else { continue }
            var draws = FaultDecision.Draws(seed: seed, recipient: recipient, number: number, rule: index)
            guard draws.unit() < rule.rate else { continue }
            decision.hits.append(rule.mode)
            switch rule.mode {
            case .drop: decision.drop = true
            case .close: decision.closeCode = decision.closeCode ?? rule.closeCode
            case .duplicate: decision.duplicate = true
            case .delay: decision.delay = (decision.delay ?? .zero) + rule.duration
            case .reorder: decision.reorderHold = rule.duration
            case .truncate:
                let kept = min(rule.keptBytes ?? length / 2, decision.truncatedLength ?? length)
                decision.truncatedLength = kept
            case .corrupt:
                let remaining = decision.truncatedLength ?? length
                guard remaining > 0 else { continue }
                let offset = Int(draws.next() % UInt64(remaining))
                decision.corruptions.append(.init(offset: offset, mask: 1 << UInt8(draws.next() % 8)))
            }
        }
        return decision
    }
}

/// What happens to one message (``RelayFaults/decide(seed:recipient:number:length:)``).
package struct FaultDecision: Sendable, Hashable {
    /// One flipped bit.
    package struct Corruption: Sendable, Hashable {
        /// Byte offset in the (possibly truncated) message.
        package var offset: Int
        /// The bit flipped (XOR mask with one bit set).
        package var mask: UInt8
    }

    /// The modes that hit the message, in rule order (for the log).
    package var hits: [RelayFault.Mode] = []
    /// Close the tunnel with this code instead of forwarding (wins over everything else).
    package var closeCode: UInt16?
    /// Do not forward the message.
    package var drop = false
    /// Cut the message to this many bytes.
    package var truncatedLength: Int?
    /// Bits to flip (after truncation).
    package var corruptions: [Corruption] = []
    /// Forward the message twice.
    package var duplicate = false
    /// Hold the message until the next one in its direction has gone, at most this long.
    package var reorderHold: Duration?
    /// Hold the message (and what follows it in its direction) this long.
    package var delay: Duration?

    /// No fault.
    package init() {}

    /// Whether the message passes untouched.
    package var isEmpty: Bool { hits.isEmpty }

    /// The bytes forwarded: `message` truncated then corrupted as decided.
    package func transform(_ message: [UInt8]) -> [UInt8] {
        var bytes = truncatedLength.map { Array(message.prefix($0)) } ?? message
        for corruption in corruptions where corruption.offset < bytes.count {
            bytes[corruption.offset] ^= corruption.mask
        }
        return bytes
    }

    /// SplitMix64's finaliser: a well-mixed 64-bit value from any 64-bit input.
    static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The random draws of one rule for one message: a SplitMix64 stream keyed by the tunnel's seed,
    /// the recipient, the message number and the rule's index, so a decision never depends on what
    /// other tunnels or directions did before.
    struct Draws {
        private var state: UInt64

        init(seed: UInt64, recipient: FaultRecipient, number: Int, rule: Int) {
            let key = UInt64(recipient == .phone ? 1 : 2) << 56 ^ UInt64(truncatingIfNeeded: number) << 16
                ^ UInt64(truncatingIfNeeded: rule)
            state = FaultDecision.mix(seed ^ FaultDecision.mix(key))
        }

        mutating func next() -> UInt64 {
            state = state &+ 0x9E37_79B9_7F4A_7C15
            return FaultDecision.mix(state)
        }

        /// A uniform value in [0, 1).
        mutating func unit() -> Double { Double(next() >> 11) / Double(UInt64(1) << 53) }
    }
}
