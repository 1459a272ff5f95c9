import CTAP2

/// Short CTAP2 command names for messages: `makeCredential`, `getAssertion`.
enum CommandName {
    static func of(_ byte: UInt8) -> String {
        switch CTAP2Command(rawValue: byte) {
        case .makeCredential: return "makeCredential"
        case .getAssertion: return "getAssertion"
        case .getInfo: return "getInfo"
        case .selection: return "selection"
        default: return CTAP2Command(rawValue: byte).description
        }
    }
}
