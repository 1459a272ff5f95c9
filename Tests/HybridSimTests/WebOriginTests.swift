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
    }

    @Test("not one origin: nil", arguments: [
        "example.com", "ftp://example.com", "https://", "https://example.com/login", "https://example.com/?q=1",
        "https://example.com#top", "https://user@example.com", "https://user:pw@example.com", "",
    ])
    func refused(text: String) {
        #expect(WebOrigin.normalized(text) == nil, "\(text)")
    }
}
