import Foundation

/// The path-parsing lists of `shared/vectors/tunnel.json` ("webauthn_rs_server_path_parsing",
/// from kanidm/webauthn-rs cable-tunnel-server/common/src/lib.rs `parse_urls`), kept as literals so
/// the tests run without the shared folder; `RelayPathTests` checks them against the file when present.
enum TunnelPathVectors {
    /// (path, method, tunnel ID as ASCII when given, routing ID as ASCII when given)
    static let valid: [(path: String, method: String, tunnelASCII: String?, routingASCII: String?)] = [
        ("/cable/new/68656C6C6F2C20776562617574686E21", "new", "hello, webauthn!", nil),
        ("/cable/connect/616263/68656C6C6F2C20776562617574686E21", "connect", "hello, webauthn!", "abc"),
        ("/cable/new/68656c6c6f2c20776562617574686e21", "new", nil, nil),
    ]

    static let invalid: [String] = [
        "/",
        "/cable/new/",
        "/cable/new/not_hex_digits_here_but_32_chars",
        "/cable/new/C0FFEE",
        "/cable/new/C0FFEEC0FFEEC0FFEEC0FFEEC0FFEEC0FFEE",
        "/cable/new/68656C6C6F2C20776562617574686E21/",
        "/cable/new/../new/68656C6C6F2C20776562617574686E21",
        "/cable/connect/C0FFEE/not_hex_digits_here_but_32_chars",
        "/cable/connect/C0FFEE/COFFEE",
        "/cable/connect/C0/FFEE",
        "/cable/connect/C0/68656C6C6F2C20776562617574686E21",
        "/cable/connect/C0F/68656C6C6F2C20776562617574686E21",
        "/cable/connect/C0FFEECO/68656C6C6F2C20776562617574686E21",
        "/cable/connect/C0FFEE/68656C6C6F2C20776562617574686E21/1234",
        "/cable/connect/C0FFEE/68656C6C6F2C20776562617574686E21/",
        "cable/new/68656C6C6F2C20776562617574686E21",
        "../cable/new/68656C6C6F2C20776562617574686E21",
        "/../cable/new/68656C6C6F2C20776562617574686E21",
        "../../../etc/passwd",
    ]

    /// `shared/vectors/tunnel.json` next to the repository (CI clones `main` with `shared/` beside
    /// it), or `nil` when it is not there.
    static var sharedFile: URL? {
        let root = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Support
            .deletingLastPathComponent()  // HybridRuntimeTests
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // repository root
        for candidate in [
            root.appendingPathComponent("Vectors/tunnel.json"),
            root.deletingLastPathComponent().appendingPathComponent("shared/vectors/tunnel.json"),
        ] where FileManager.default.fileExists(atPath: candidate.path) {
            return candidate
        }
        return nil
    }
}
