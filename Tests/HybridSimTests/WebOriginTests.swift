import HybridSim
import Testing

/// `--origin` as a browser serializes an origin (the form `clientDataJSON` carries).
@Suite struct WebOriginTests {
    @Test("an origin is kept; a trailing slash and upper case are normalized away; a port stays")
    func normalized() {
        #expect(WebOrigin.normalized("https://example.com") == "https://example.com")
        #expect(WebOrigin.normalized("https://example.com/") == "https://example.com")
        #expect(WebOrigin.normalized("HTTPS://Login.Example.COM/") == "https://login.example.com")
        #expect(WebOrigin.normalized("http://localhost:8080") == "http://localhost:8080")
        #expect(WebOrigin.normalized("http://[::1]:8080") == "http://[::1]:8080")
        // The scheme's default port goes, as a browser drops it; another stays, without leading zeros.
        #expect(WebOrigin.normalized("https://example.com:443/") == "https://example.com")
        #expect(WebOrigin.normalized("http://example.com:80") == "http://example.com")
        #expect(WebOrigin.normalized("http://example.com:443") == "http://example.com:443")
        #expect(WebOrigin.normalized("https://example.com:08443") == "https://example.com:8443")
        // An international name stays (or becomes) punycode, as browsers serialize it.
        #expect(WebOrigin.normalized("https://xn--bcher-kva.example") == "https://xn--bcher-kva.example")
        #expect(WebOrigin.normalized("https://bücher.example/") == "https://xn--bcher-kva.example")
        #expect(WebOrigin.host(of: "https://login.xn--bcher-kva.example") == "login.xn--bcher-kva.example")
    }

    @Test("not one origin: nil", arguments: [
        "example.com", "ftp://example.com", "https://", "https://example.com/login", "https://example.com/?q=1",
        "https://example.com#top", "https://user@example.com", "https://user:pw@example.com", "",
        "https://example.com:99999", "https://example.com:0", "https://a%41.example",
    ])
    func refused(text: String) {
        #expect(WebOrigin.normalized(text) == nil, "\(text)")
    }
}
