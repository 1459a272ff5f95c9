import CTAP2
import HybridCore
import HybridRuntime

/// The phone's voice: progress lines on stderr, and with `--json` one event object per line on stdout.
struct PhoneNarrator: Sendable {
    let output: ProgramOutput
    let json: Bool
    let relayURL: String
    let proximityURL: String
    let rssi: Int
    /// The linked flow: the desktop created the tunnel (`/cable/contact`) and the phone joined it;
    /// in the QR flow the phone creates it (`/cable/new`).
    var joinsTunnel = false
    /// `"linked"` under `--listen`: every `--json` event carries `"flow": "linked"`, first (absent
    /// in the QR flow, whose stream stays as it was).
    var flow: String? = nil
    /// Each progress line begins with the time (``LogTime``), as the relay's log lines do: a
    /// listener runs for hours, and its lines are read later beside the relay's and the desktops'.
    var timestamps = false

    /// A progress line on stderr.
    func say(_ line: String) {
        // It may quote the desktop's text (an RP ID, a user name): one line stays one line (`PeerText`).
        let printable = PeerText.printable(line, limit: PeerText.lineLimit)
        output.standardError(timestamps ? LogTime.stamp() + " " + printable : printable)
    }

    /// A `--json` event on stdout (nothing without `--json`).
    func event(_ name: String, _ members: [(String, JSONLine.Value)] = []) {
        guard json else { return }
        output.standardOutput(JSONLine(event: name, (flow.map { [("flow", .string($0))] } ?? []) + members).text)
    }

    /// Narrates one driver event.
    func session(_ event: SessionEvent) {
        switch event {
        case .tunnelCreated:
            self.event("connected", [("relay", .string(relayURL))])
        case .advertising:
            say("tunnel \(joinsTunnel ? "joined" : "created"), advertising (rssi \(rssi) dBm) to \(proximityURL)")
            self.event("advert", [("rssi", .int(rssi)), ("proximity", .string(proximityURL))])
        case .handshakeAnswered:
            say("handshake done")
            self.event("handshake")
        case .requestReceived(let command, let plaintextBytes):
            self.event("request", [("command", .string(CommandName.of(command))), ("bytes", .int(plaintextBytes))])
        case .responseSent(let status, _):
            self.event("response", [("status", .string(CTAP2StatusCode(rawValue: status).name))])
        case .waitingForAdvert, .advertAccepted, .tunnelJoined, .handshakeSent, .authenticatorReady, .linkingReceived,
            .requestSent, .responseReceived, .shutdownSent, .shutdownReceived:
            break
        case .closedAfterResponse(let reason):
            say("note: the desktop sent no shutdown message after the response (\(reason)); transaction complete")
            self.event("closedAfterResponse", [("reason", .string(reason))])
        }
    }
}
