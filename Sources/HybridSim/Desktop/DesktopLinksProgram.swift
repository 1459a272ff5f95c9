import CTAP2
import Foundation
import HybridCore
import HybridRuntime

/// `hybrid-sim desktop --list-links` and `desktop --forget NAME|all`: the desktop's own side of its
/// links, read and changed with no network (Docs/LINKING.md). The phone keeps its side: forgetting a
/// link here does not revoke it there (that is `phone --unlink`), it only stops this desktop from
/// contacting the phone, as removing a phone from Chrome's list does. It is how a link to a phone
/// that can no longer answer (wiped, lost) is removed when no relay answers 410 for it.
public enum DesktopLinksProgram {
    /// Prints every link of `path`, one per line on stdout (`NAME: linked DATE, tunnel service DOMAIN,
    /// contact ID ABCD…`), or with `json` one `links` event with a `links` array of
    /// `{name, linkedAt, tunnelDomain}`. No file or no link: nothing on stdout (an empty array with
    /// `json`) and a line on stderr; exit 0. A store that cannot be read: exit 2.
    public static func list(path: String, json: Bool, output: ProgramOutput = .standard) -> Int32 {
        let store: LinkStore
        do {
            store = try LinkStore.load(path: path)
        } catch {
            return fail(LinkStore.unusable(error), json: json, output: output)
        }
        if store.links.isEmpty {
            // A mistyped path is the likelier mistake than an empty store: say which it is.
            output.standardError(FileManager.default.fileExists(atPath: path) ? "no linked phone in \(path)" : "no linked phone: \(path) does not exist")
        }
        if json {
            let entries = store.links.map { link in
                "{\"name\":\(JSONLine.quote(link.name)),\"linkedAt\":\(link.linkedAt),\"tunnelDomain\":\(link.tunnelDomain)}"
            }
            output.standardOutput(JSONLine(event: "links", [("links", .raw("[" + entries.joined(separator: ",") + "]"))]).text)
            return 0
        }
        for link in store.links {
            output.standardOutput(
                "\(PeerText.printable(link.name, limit: PeerText.lineLimit)): linked \(date(link.linkedAt)), tunnel service "
                    + "\(TunnelDomainID(rawValue: link.tunnelDomain)), contact ID "
                    + Hex.encode(link.contactID.prefix(2), uppercase: true) + "…")
        }
        return 0
    }

    /// Removes the link named `name` (`all`: every link; a phone named "all" goes with the others)
    /// from `path`, under the store lock; says what it removed on stderr (with `json`, a
    /// `forgotten` event with the `names`). A name with no link is exit 2 naming the links there
    /// are; nothing is written then, and a file that does not exist is not created.
    public static func forget(_ name: String, path: String, json: Bool, output: ProgramOutput = .standard) -> Int32 {
        // No file: nothing to take a lock for (which would create its directory and lock file).
        guard FileManager.default.fileExists(atPath: path) else {
            if name != "all" {
                return fail(ProgramFailure(.badInput, "no linked phone named \"\(PeerText.printable(name))\": \(path) does not exist"), json: json, output: output)
            }
            output.standardError("no linked phone: \(path) does not exist; nothing to forget")
            if json { output.standardOutput(JSONLine(event: "forgotten", [("names", .raw("[]"))]).text) }
            return 0
        }
        let removed: [String], known: [String]
        do {
            (removed, known) = try LinkStore.remove(path: path) { name == "all" || $0.name == name }
        } catch {
            return fail(LinkStore.unusable(error), json: json, output: output)
        }
        // Names come from phones: printed escaped (a control character cannot repaint the terminal).
        func quoted(_ names: [String]) -> String { names.map { "\"\(PeerText.printable($0))\"" }.joined(separator: ", ") }
        if removed.isEmpty, name != "all" {
            return fail(
                ProgramFailure(
                    .badInput, "no linked phone named \"\(PeerText.printable(name))\" in \(path) (links: \(known.isEmpty ? "none" : quoted(known)))"),
                json: json, output: output)
        }
        output.standardError(
            removed.isEmpty
                ? "no linked phone in \(path); nothing to forget"
                : "forgot \(quoted(removed)) (\(path)); the phone keeps its side "
                    + "until it unlinks (phone --unlink); link again by QR code with --link")
        if json {
            let names = removed.map(JSONLine.quote).joined(separator: ",")
            output.standardOutput(JSONLine(event: "forgotten", [("names", .raw("[" + names + "]"))]).text)
        }
        return 0
    }

    private static func fail(_ failure: ProgramFailure, json: Bool, output: ProgramOutput) -> Int32 {
        if json { output.standardOutput(JSONLine(event: "error", JSONLine.errorMembers(failure)).text) }
        output.standardError("error: \(failure.message)")
        return failure.exitCode
    }

    private static func date(_ seconds: UInt64) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: Date(timeIntervalSince1970: TimeInterval(min(seconds, 253_402_300_799))))
    }
}
