import Foundation
import NIOCore

/// A web origin as a browser serializes it (`https://example.com`, `http://localhost:8080`): scheme
/// and host in lower case, a port only when given, no path, query, fragment or user. What people
/// type is accepted when it names one origin, with the trailing `/` a copied URL brings
/// (`https://example.com/`) dropped, since no browser puts it in `clientDataJSON`'s `origin` and a
/// relying party compares that string exactly.
package enum WebOrigin {
    /// The serialized origin of `text`, or `nil` when it is not exactly one `http`/`https` origin.
    /// The host is kept in its ASCII form (an international name as punycode, `xn--…`), and the
    /// scheme's default port (443, 80) is dropped, as a browser does.
    package static func normalized(_ text: String) -> String? {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            ["https", "http"].contains(scheme), let host = asciiHost(components), !host.isEmpty,
            components.path.isEmpty || components.path == "/", components.query == nil, components.fragment == nil,
            components.user == nil, components.password == nil
        else { return nil }
        var port = ""
        if let number = components.port {
            guard (1...65535).contains(number) else { return nil }
            if number != (scheme == "https" ? 443 : 80) { port = ":\(number)" }
        }
        return "\(scheme)://\(host)\(port)"
    }

    /// Why `origin` (serialized) is refused as the origin this program writes into `clientDataJSON`
    /// or expects there: its host ends in a dot (`https://example.com.`, a fully qualified name
    /// copied whole), which a relying party comparing origins exactly takes for another origin than
    /// `https://example.com`, and which `--rp-id` refuses as a host. A browser's `Origin` header may
    /// be such an origin, so this is no part of ``normalized(_:)``. `nil` when there is no problem.
    package static func trailingDotProblem(_ origin: String) -> String? {
        guard let host = host(of: origin), host.hasSuffix(".") else { return nil }
        let bare = origin.replacingOccurrences(of: host, with: String(host.dropLast()))
        return "--origin \(origin) has a host ending in a dot, which a relying party comparing origins exactly takes for "
            + "another origin than \(bare), and --rp-id refuses such a host; write \(bare)"
    }

    /// The host of an origin as the relying party ID is compared with it: ASCII, lower case.
    package static func host(of origin: String) -> String? {
        URLComponents(string: origin).flatMap(asciiHost)
    }

    /// Whether `text` could be a host name: letters, digits, dots and hyphens (a DNS name or an IPv4
    /// address), so not a URL (`https://example.com`) or a host with a port (`example.com:443`).
    /// Upper case and non-ASCII letters pass: the RP ID checks say how to write those.
    package static func isPlausibleHost(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 253 && !text.hasPrefix(".") && !text.hasSuffix(".")
            && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || $0 == "." || $0 == "-" }
    }

    /// `host` as a browser writes it in an origin: lower case, and punycode (`xn--…`) for a label
    /// with other letters (`bücher.example` → `xn--bcher-kva.example`, `Example.COM` →
    /// `example.com`); `nil` when it is none.
    package static func asciiForm(ofHost host: String) -> String? {
        URLComponents(string: "https://\(host)").flatMap(asciiHost)
    }

    /// Why `rpId` is not an RP ID a browser accepts although it names a host (upper case or
    /// non-ASCII letters: the RP ID is compared with the origin's host, which is lower case and
    /// punycode), with the form to write; `nil` when it is in that form already.
    package static func rpIdFormProblem(_ rpId: String) -> String? {
        let ascii = asciiForm(ofHost: rpId)
        guard ascii != rpId else { return nil }
        let form = ascii.map { "write it \($0)" } ?? "write it in lower case, with punycode (xn--…) for other letters"
        return "RP ID \(rpId) is not one a browser accepts: it is compared with the origin's host, which is lower case "
            + "(and punycode for other letters); \(form)"
    }

    /// The origin a browser sends for `origin` (serialized) when its host is an IPv6 address not
    /// written as a browser writes one (RFC 5952: compressed, lower case: `http://[0:0::1]:8080` is
    /// `http://[::1]:8080`), so that a list of allowed origins compared exactly can match it; `nil`
    /// when the host is no IPv6 address or already in that form.
    package static func canonicalIPv6Form(of origin: String) -> String? {
        guard let components = URLComponents(string: origin), let scheme = components.scheme,
            let host = asciiHost(components)
        else { return nil }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard bare.contains(":"), let address = try? SocketAddress(ipAddress: bare, port: 0), let canonical = address.ipAddress,
            canonical != bare,
            // An embedded IPv4 address (`::ffff:127.0.0.1`): the C library writes it dotted, a browser
            // (the URL Standard) in hex pieces (`::ffff:7f00:1`); no form to advise, so not refused.
            !canonical.contains("."), !bare.contains(".")
        else { return nil }
        return "\(scheme)://[\(canonical)]\(components.port.map { ":\($0)" } ?? "")"
    }

    /// Why `flag`'s `value` (serialized as `origin`) never matches a browser's `Origin` compared
    /// exactly (``canonicalIPv6Form(of:)``), with the form to give; `nil` when it can.
    package static func ipv6FormProblem(flag: String, value: String, origin: String) -> String? {
        canonicalIPv6Form(of: origin).map { canonical in
            "\(flag) '\(value)' never matches: a browser sends this origin as \(canonical) (its IPv6 address compressed, RFC 5952); give that"
        }
    }

    /// `encodedHost` (`host` decodes punycode to Unicode), lower-cased; `nil` with a percent escape.
    private static func asciiHost(_ components: URLComponents) -> String? {
        guard let host = components.encodedHost?.lowercased(), !host.contains("%") else { return nil }
        return host
    }
}
