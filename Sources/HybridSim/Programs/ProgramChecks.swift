import Foundation
import HybridRuntime

/// Checks of addresses both programs take.
package enum ProgramChecks {
    /// `ws://HOST:PORT` on loopback, nothing after the port but an optional `/`: no user name, query
    /// or fragment, and an IPv4 address in dotted decimal (``LoopbackAddress/nonCanonicalIPv4(_:)``).
    package static func relayURL(_ url: String) throws(ProgramFailure) {
        if url.lowercased().hasPrefix("wss://") {
            throw ProgramFailure(
                .badInput, "--relay \(url): wss:// (TLS) is not supported, the relay is a loopback simulator; give ws://127.0.0.1:PORT")
        }
        let components = URLComponents(string: url)
        // What the connecting side (`WebSocketURL`) does not read: refused here rather than taken
        // for part of the host or the port there.
        if url.hasPrefix("ws://"), let components {
            if components.user != nil || components.password != nil {
                throw ProgramFailure(.badInput, "--relay \(url) has a user name (before @): a relay takes none; give ws://HOST:PORT")
            }
            if components.fragment != nil {
                throw ProgramFailure(.badInput, "--relay \(url) has a fragment (#…): give the relay's base URL, ws://HOST:PORT")
            }
            if components.query != nil {
                throw ProgramFailure(.badInput, "--relay \(url) has a query (?…): give the relay's base URL, ws://HOST:PORT")
            }
            if let host = components.host, let problem = LoopbackAddress.nonCanonicalIPv4(host) {
                throw ProgramFailure(.badInput, "--relay \(url): \(problem)")
            }
        }
        if url.hasPrefix("ws://"), let path = components?.path, !path.isEmpty, path != "/" {
            throw ProgramFailure(
                .badInput, "--relay \(url) has a path: give the relay's base URL, ws://HOST:PORT (the programs add /cable/…)")
        }
        guard url.hasPrefix("ws://"), let components, let host = components.host,
            !host.isEmpty, let port = components.port, (1...65535).contains(port), components.query == nil
        else {
            throw ProgramFailure(.badInput, "--relay \(url) must look like \(ProgramDefaults.relayURL)")
        }
        guard LoopbackAddress.isLoopback(host) else {
            throw ProgramFailure(.badInput, "--relay \(url) is not on loopback (127.0.0.1, ::1 or localhost)")
        }
    }

    /// `udp://HOST:PORT` on loopback.
    static func proximityURL(_ url: String) throws(ProgramFailure) {
        let endpoint: ProximityEndpoint
        do {
            endpoint = try ProximityEndpoint(parsing: url)
        } catch {
            throw ProgramFailure(.badInput, "--proximity \(url) must look like \(ProgramDefaults.proximityURL)")
        }
        if let problem = LoopbackAddress.nonCanonicalIPv4(endpoint.host) {
            throw ProgramFailure(.badInput, "--proximity \(url): \(problem)")
        }
        guard LoopbackAddress.isLoopback(endpoint.host) else {
            throw ProgramFailure(.badInput, "--proximity \(url) is not on loopback (127.0.0.1, ::1 or localhost)")
        }
    }

    /// A store file given on the command line (`--store`, `--rp-store`, `--links`): a file name,
    /// neither empty nor a directory's (ending in `/`, `.` or `..`), so the mistake is found before
    /// any socket, not when the first save fails after the user approved (`nil`: the default).
    /// `fileName` is the store's usual name, for the advice.
    package static func storePath(_ path: String?, flag: String, fileName: String) throws(ProgramFailure) {
        guard let path else { return }
        guard !path.isEmpty else {
            throw ProgramFailure(.badInput, "\(flag) needs a file name (\(flag) DIR/\(fileName); leave it out for the default)")
        }
        guard AtomicFile.namesFile(path) else {
            let directory = path.hasSuffix("/") ? path : path + "/"
            throw ProgramFailure(
                .badInput, "\(flag) \(path) names a directory, not the store file: give \(flag) \(directory)\(fileName)")
        }
    }

    /// The relay URL without a trailing `/`.
    static func trimmedRelayURL(_ url: String) -> String {
        url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}
