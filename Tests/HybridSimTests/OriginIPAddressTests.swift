@testable import HybridSim
import Testing

/// Origins and RP IDs with IP addresses: `relay --allow-origin` takes an IPv6 origin only in the
/// form a browser sends (compared exactly, `[0:0::1]` would never match `[::1]`), and `rp` refuses
/// an IPv4 RP ID as the desktop refuses an IP-address origin (no browser makes such a request).
@Suite("Origins and RP IDs with IP addresses")
struct OriginIPAddressTests {
    @Test("an IPv6 origin not in RFC 5952 form gets the form a browser sends; others are left alone")
    func canonicalIPv6() {
        #expect(WebOrigin.canonicalIPv6Form(of: "http://[0:0::1]:8080") == "http://[::1]:8080")
        #expect(WebOrigin.canonicalIPv6Form(of: "https://[0:0:0:0:0:0:0:1]") == "https://[::1]")
        #expect(WebOrigin.canonicalIPv6Form(of: "http://[::1]:8080") == nil)
        #expect(WebOrigin.canonicalIPv6Form(of: "http://127.0.0.1:8080") == nil)
        #expect(WebOrigin.canonicalIPv6Form(of: "https://example.com") == nil)
        // An embedded IPv4 address: a browser writes [::ffff:7f00:1], the C library ::ffff:127.0.0.1;
        // neither is refused (the browser's own form was, naming a form that never matches).
        #expect(WebOrigin.canonicalIPv6Form(of: "http://[::ffff:7f00:1]:8080") == nil)
        #expect(WebOrigin.canonicalIPv6Form(of: "http://[::ffff:127.0.0.1]:8080") == nil)
    }

    @Test("rp --rp-id 127.0.0.1 is refused with the desktop's advice (use localhost)")
    func ipv4RPID() {
        var configuration = RelyingPartyServerProgram.Configuration(profile: "hanko")
        configuration.rpId = "127.0.0.1"
        let error = #expect(throws: ProgramFailure.self) { _ = try RelyingPartyServerProgram.checked(configuration) }
        #expect(error?.kind == .badInput)
        #expect(
            error?.message
                == "--rp-id 127.0.0.1 is an IP address, and a browser makes no WebAuthn request from a page whose host is one "
                + "(its effective domain is not a valid domain: a SecurityError), so this server could verify nothing; use localhost")
        configuration.rpId = "localhost"
        #expect((try? RelyingPartyServerProgram.checked(configuration)) == "https://localhost")
    }
}
