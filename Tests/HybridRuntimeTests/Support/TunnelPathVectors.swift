import HybridTestSupport
import Testing

/// One case of `Vectors/tunnel.json`: a request path the tunnel service accepts (with its method
/// and, for `contact`, the contact ID in hex) or rejects (`expectError`). Upstream of the `new` and
/// `connect` cases: kanidm/webauthn-rs cable-tunnel-server `parse_urls`.
struct TunnelPathVector: Decodable, Sendable, CustomTestStringConvertible {
    let name: String
    let path: String
    let method: String?
    let contactID: String?
    let expectError: String?

    var testDescription: String { path.isEmpty ? "(empty)" : path }
}

/// The path vectors, loaded once from the repository's `Vectors/tunnel.json`.
enum TunnelPathVectors {
    /// Every vector, or the load error.
    static let loaded: Result<[TunnelPathVector], any Error> = Result {
        try Vectors.load("tunnel", as: VectorFile<TunnelPathVector>.self).vectors
    }

    static var all: [TunnelPathVector] { (try? loaded.get()) ?? [] }

    /// Paths the service accepts.
    static var valid: [TunnelPathVector] { all.filter { $0.expectError == nil } }

    /// Paths the service must reject.
    static var invalid: [String] { all.filter { $0.expectError != nil }.map(\.path) }
}
