import CTAP2
import HybridCore
import HybridRuntime

/// The desktop's voice: progress lines on stderr, and with `--json` one event object per line on stdout.
struct DesktopNarrator: Sendable {
    let output: ProgramOutput
    let json: Bool
    /// With `--link` or `--linked`, every `--json` event carries `"flow": "qr-link"` or `"linked"`.
    var flow: String? = nil

    /// A progress line on stderr. It may quote the relying party's or the phone's text (a user
    /// name, an RP ID), so control characters are escaped (`PeerText`): one line stays one line.
    func say(_ line: String) {
        output.standardError(PeerText.printable(line, limit: PeerText.lineLimit))
    }

    /// A `--json` event on stdout (nothing without `--json`).
    func event(_ name: String, _ members: [(String, JSONLine.Value)] = []) {
        guard json else { return }
        output.standardOutput(JSONLine(event: name, members + (flow.map { [("flow", .string($0))] } ?? [])).text)
    }

    /// Narrates one driver event.
    func session(_ event: SessionEvent) {
        switch event {
        case .advertAccepted(let rssi, let domain, let ignored):
            let others = ignored > 0 ? ", \(ignored) other datagram(s) ignored" : ""
            // Every valid domain is joined on this desktop's relay (the contract's mapping); one
            // other than the usual 0 is named, since a browser would look for the phone there.
            let elsewhere =
                domain == .google
                ? "" : "; tunnel domain \(domain.rawValue), \(domain.host ?? "unknown") for a browser, joined on this desktop's relay"
            say("advert accepted (rssi \(rssi) dBm\(others)\(elsewhere))")
            self.event("advert", [("rssi", .int(Int(rssi))), ("ignored", .int(ignored)), ("domain", .int(Int(domain.rawValue)))])
        case .tunnelJoined:
            // A linked contact's 101 comes when the relay hands the request to the phone's push
            // channel, before the phone has judged it: it may still refuse (revoked, 4410).
            // "tunnel connected" is a progress line of the external contract: kept, with the detail.
            say(flow == "linked" ? "tunnel connected (the relay pushed the contact to the linked phone; waiting for it to join and answer)" : "tunnel connected")
            self.event("connected")
        case .authenticatorReady:
            say("handshake done")
            self.event("handshake")
        case .linkingReceived(let name):
            say(flow == "qr-link"
                ? "the phone sent linking information (\(name)), signature verified; stored once the relying party verifies the answer"
                : "the phone sent linking information (\(name)); not stored (no --link)")
        case .requestSent(let command, let plaintextBytes, _):
            let name = CommandName.of(command)
            say("request sent (\(name), \(plaintextBytes) bytes)")
            self.event("request", [("command", .string(name)), ("bytes", .int(plaintextBytes))])
        case .responseReceived(let status, let plaintextBytes, _):
            let statusName = CTAP2StatusCode(rawValue: status).name
            say("response received (\(statusName), \(plaintextBytes) bytes)")
            self.event("response", [("status", .string(statusName)), ("bytes", .int(plaintextBytes))])
        case .waitingForAdvert, .handshakeSent, .shutdownSent, .tunnelCreated, .advertising, .handshakeAnswered,
            .requestReceived, .responseSent, .shutdownReceived, .closedAfterResponse:
            break
        }
    }
}
