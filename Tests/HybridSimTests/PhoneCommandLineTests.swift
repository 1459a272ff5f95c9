@testable import HybridSim
import Testing

/// The desktop's `phone command:` line runs as pasted: the relay URL and the proximity address are
/// shell words too (`ws://[::1]:P` unquoted is a glob: zsh's "no matches found", bash's failglob).
@Suite("Desktop: the phone command line is pasteable")
struct PhoneCommandLineTests {
    @Test("an IPv6 relay URL and proximity address are quoted; IPv4 ones stay bare")
    func quotesBrackets() {
        let ipv6 = Run.phoneCommand(
            scan: ["--scan", "qr.png"], relayURL: "ws://[::1]:47001", proximity: "udp://[::1]:47002", hint: "hint")
        #expect(ipv6 == "phone command: hybrid-sim phone --scan qr.png --relay 'ws://[::1]:47001' --proximity 'udp://[::1]:47002'  (hint)")
        let ipv4 = Run.phoneCommand(
            scan: ["--scan", "qr.png"], relayURL: "ws://127.0.0.1:47001", proximity: "udp://127.0.0.1:47002", hint: "hint")
        #expect(ipv4 == "phone command: hybrid-sim phone --scan qr.png --relay ws://127.0.0.1:47001 --proximity udp://127.0.0.1:47002  (hint)")
        let spaced = Run.phoneCommand(
            scan: ["--scan", "my qr.png"], relayURL: "ws://127.0.0.1:47001", proximity: "udp://127.0.0.1:47002", hint: "hint")
        #expect(spaced.hasPrefix("phone command: hybrid-sim phone --scan 'my qr.png' --relay "))
    }

    @Test("the code as text goes in the environment, before the command: no FIDO:/ among the phone's arguments (ps shows those to every user)")
    func codeInTheEnvironment() {
        let line = Run.phoneCommand(
            environment: "HYBRID_SIM_QR=FIDO:/0123 ", scan: [], relayURL: "ws://127.0.0.1:47001", proximity: "udp://127.0.0.1:47002",
            hint: "hint")
        #expect(line == "phone command: HYBRID_SIM_QR=FIDO:/0123 hybrid-sim phone --relay ws://127.0.0.1:47001 --proximity udp://127.0.0.1:47002  (hint)")
    }
}
