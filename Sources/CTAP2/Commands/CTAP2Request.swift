/// A CTAP2 request as carried in a hybrid `kCTAP` frame: `command ‖ CBOR parameters`
/// (CTAP 2.2 §8.1 "Commands"; PROTOCOL.md §8.2).
///
/// The commands a hybrid phone accepts are modelled; any other command keeps its raw parameter bytes
/// in ``other(command:parameters:)`` so the authenticator can answer `CTAP1_ERR_INVALID_COMMAND`.
public enum CTAP2Request: Hashable, Sendable {
    /// `authenticatorMakeCredential` (0x01).
    case makeCredential(MakeCredentialRequest)
    /// `authenticatorGetAssertion` (0x02).
    case getAssertion(GetAssertionRequest)
    /// `authenticatorGetInfo` (0x04), no parameters.
    case getInfo
    /// `authenticatorSelection` (0x0B), no parameters.
    case selection
    /// Any other command with its parameter bytes, undecoded.
    case other(command: CTAP2Command, parameters: [UInt8])

    /// The command byte.
    public var command: CTAP2Command {
        switch self {
        case .makeCredential: return .makeCredential
        case .getAssertion: return .getAssertion
        case .getInfo: return .getInfo
        case .selection: return .selection
        case .other(let command, _): return command
        }
    }

    /// Decodes `command ‖ CBOR`.
    ///
    /// - Throws: ``CTAP2Error/Code/unknownCommand`` for empty input; ``CTAP2Error/Code/missingField``
    ///   when makeCredential or getAssertion has no parameters; ``CTAP2Error/Code/invalidLength`` when
    ///   getInfo or selection has some; ``CTAP2Error/Code/invalidCBOR`` and the parameter errors of
    ///   ``MakeCredentialRequest`` and ``GetAssertionRequest``.
    public init(bytes: some Collection<UInt8>) throws(CTAP2Error) {
        guard let first = bytes.first else {
            throw CTAP2Error(.unknownCommand, "CTAP2 request without a command byte")
        }
        let command = CTAP2Command(rawValue: first)
        let parameters = bytes.dropFirst()
        switch command {
        case .makeCredential:
            guard !parameters.isEmpty else {
                throw CTAP2Error(.missingField, "authenticatorMakeCredential without parameters")
            }
            self = .makeCredential(try MakeCredentialRequest(bytes: parameters))
        case .getAssertion:
            guard !parameters.isEmpty else {
                throw CTAP2Error(.missingField, "authenticatorGetAssertion without parameters")
            }
            self = .getAssertion(try GetAssertionRequest(bytes: parameters))
        case .getInfo, .selection:
            guard parameters.isEmpty else {
                throw CTAP2Error(.invalidLength, "\(command) takes no parameters, found \(parameters.count) bytes")
            }
            self = command == .getInfo ? .getInfo : .selection
        default:
            self = .other(command: command, parameters: Array(parameters))
        }
    }

    /// `command ‖ CBOR`, the payload of a `kCTAP` frame.
    public func encode() -> [UInt8] {
        switch self {
        case .makeCredential(let request): return [CTAP2Command.makeCredential.rawValue] + request.encode()
        case .getAssertion(let request): return [CTAP2Command.getAssertion.rawValue] + request.encode()
        case .getInfo: return [CTAP2Command.getInfo.rawValue]
        case .selection: return [CTAP2Command.selection.rawValue]
        case .other(let command, let parameters): return [command.rawValue] + parameters
        }
    }
}
