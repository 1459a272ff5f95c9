@testable import HybridSim
import Testing

/// `--relay` and `--proximity` are refused at the check (exit 64) for what the connecting side
/// would read differently: a user name, a fragment or a query, and IPv4 addresses the resolver
/// reads as `inet_aton` does (`127.0.0.010` is 127.0.0.8).
@Suite("Program checks: --relay and --proximity addresses")
struct ProgramChecksURLTests {
    @Test(
        "refused with the reason",
        arguments: [
            ("ws://user@127.0.0.1:47001", "--relay ws://user@127.0.0.1:47001 has a user name (before @): a relay takes none; give ws://HOST:PORT"),
            ("ws://127.0.0.1:47001#f", "--relay ws://127.0.0.1:47001#f has a fragment (#…): give the relay's base URL, ws://HOST:PORT"),
            ("ws://127.0.0.1:47001/?a=b", "--relay ws://127.0.0.1:47001/?a=b has a query (?…): give the relay's base URL, ws://HOST:PORT"),
            (
                "ws://127.0.0.010:47001",
                "--relay ws://127.0.0.010:47001: 127.0.0.010 is not an IPv4 address in dotted decimal (four numbers 0-255 without leading zeros; "
                    + "the resolver would read a leading 0 as octal, or fill in missing parts; for decimal, write 127.0.0.10)"
            ),
            (
                "ws://127.1:47001",
                "--relay ws://127.1:47001: 127.1 is not an IPv4 address in dotted decimal (four numbers 0-255 without leading zeros; "
                    + "the resolver would read a leading 0 as octal, or fill in missing parts)"
            ),
        ])
    func refusedRelay(url: String, message: String) {
        let error = #expect(throws: ProgramFailure.self) { try ProgramChecks.relayURL(url) }
        #expect(error?.kind == .badInput)
        #expect(error?.message == message)
    }

    @Test("dotted decimal, IPv6 in brackets and localhost pass")
    func accepted() throws {
        for url in ["ws://127.0.0.1:47001", "ws://127.0.0.10:47001/", "ws://[::1]:47001", "ws://localhost:47001"] {
            try ProgramChecks.relayURL(url)
        }
        for url in ["udp://127.0.0.1:47002", "udp://127.0.0.2:47002", "udp://[::1]:47002", "udp://localhost:47002"] {
            try ProgramChecks.proximityURL(url)
        }
    }

    @Test("--proximity with a leading zero is refused too")
    func refusedProximity() {
        let error = #expect(throws: ProgramFailure.self) { try ProgramChecks.proximityURL("udp://127.0.0.010:47002") }
        #expect(error?.message.hasPrefix("--proximity udp://127.0.0.010:47002: 127.0.0.010 is not an IPv4 address in dotted decimal") == true)
    }
}
