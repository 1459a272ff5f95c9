import Foundation

/// A web origin as a browser serializes it (`https://example.com`, `http://localhost:8080`): scheme
/// and host in lower case, a port only when given, no path, query, fragment or user. What people
/// type is accepted when it names one origin, with the trailing `/` a copied URL brings
/// (`https://example.com/`) dropped, since no browser puts it in `clientDataJSON`'s `origin` and a
/// relying party compares that string exactly.
package enum WebOrigin {
    /// The serialized origin of `text`, or `nil` when it is not exactly one `http`/`https` origin.
    package static func normalized(_ text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            ["https", "http"].contains(scheme), let host = components.host?.lowercased(), !host.isEmpty,
            components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil,
            components.user == nil, components.password == nil
        else { return nil }
        let port = components.port.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(port)"
    }
}
