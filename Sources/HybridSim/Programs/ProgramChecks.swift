import Foundation
import HybridRuntime

/// Checks of addresses both programs take.
package enum ProgramChecks {
    /// `ws://HOST:PORT` on loopback, nothing after the port but an optional `/`.
    package static func relayURL(_ url: String) throws(ProgramFailure) {
        if url.lowercased().hasPrefix("wss://") {
            throw ProgramFailure(
                .badInput, "--relay \(url): wss:// (TLS) is not supported, the relay is a loopback simulator; give ws://127.0.0.1:PORT")
        }
        let components = URLComponents(string: url)
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
        guard LoopbackAddress.isLoopback(endpoint.host) else {
            throw ProgramFailure(.badInput, "--proximity \(url) is not on loopback (127.0.0.1, ::1 or localhost)")
        }
    }

    /// The relay URL without a trailing `/`.
    static func trimmedRelayURL(_ url: String) -> String {
        url.hasSuffix("/") ? String(url.dropLast()) : url
    }
}
