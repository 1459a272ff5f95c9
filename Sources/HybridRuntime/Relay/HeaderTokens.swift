import NIOHTTP1

extension HTTPHeaders {
    /// Calls `body` with each comma-separated, whitespace-trimmed element of every field named
    /// `name` (ASCII, any case; `name` given in lower case), in order: the elements NIO's
    /// `headers[canonicalForm: name]` lists, read without building that list or lowering any string
    /// (the relay reads four such headers per request). `body` returns `false` to stop.
    package func forEachToken(named name: String, _ body: (Substring) -> Bool) {
        for (field, value) in self where Self.sameName(field, name) {
            // As NIO: split on commas dropping empty pieces, then trim each (a piece of only
            // whitespace stays, as an empty element).
            guard value.utf8.contains(UInt8(ascii: ",")) else {
                if !value.isEmpty, !body(Self.trimmed(value[...])) { return }
                continue
            }
            for element in value.split(separator: ",") {
                if !body(Self.trimmed(element)) { return }
            }
        }
    }

    /// Whether any element of the fields named `name` is `token`, compared as ASCII without case
    /// when `anyCase`, exactly otherwise.
    func containsToken(named name: String, _ token: String, anyCase: Bool = false) -> Bool {
        var found = false
        forEachToken(named: name) { element in
            found = anyCase ? Self.sameName(element, token) : element == token[...]
            return !found
        }
        return found
    }

    /// The only element of the fields named `name`, or `nil` when there is none or more than one.
    func onlyToken(named name: String) -> Substring? {
        var only: Substring?
        var count = 0
        forEachToken(named: name) { element in
            count += 1
            only = element
            return count < 2
        }
        return count == 1 ? only : nil
    }

    /// ASCII comparison without case of `a` against `lowered` (lower case).
    private static func sameName<S: StringProtocol>(_ a: S, _ lowered: String) -> Bool {
        a.utf8.count == lowered.utf8.count
            && zip(a.utf8, lowered.utf8).allSatisfy { byte, low in
                byte == low || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") && byte | 0x20 == low)
            }
    }

    private static func trimmed(_ text: Substring) -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isSpace($0) }) else { return text[text.endIndex...] }
        let last = text.lastIndex(where: { !isSpace($0) })!
        return text[first...last]
    }
}
