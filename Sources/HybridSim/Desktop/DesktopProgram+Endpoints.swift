import Foundation
import HybridCore
import HybridRuntime
import Logging

/// The desktop's two endpoints: the relay it uses (embedded, or `--relay`) and its proximity
/// scanner.
extension Run {
    /// The relay in use: its URL and, when embedded, the running relay.
    struct RelayInUse {
        var url: String
        var embedded: TunnelRelay?
    }

    func startRelay(timeout: Duration) async throws -> RelayInUse {
        switch configuration.relay {
        case .external(let url):
            let trimmed = ProgramChecks.trimmedRelayURL(url)
            narrator.say("using the relay at \(trimmed)")
            // A relay started later is fine (the phone connects to it, not the desktop), so this
            // is a note: a typo in --relay is otherwise only seen as "no advert arrived".
            if Self.refusesConnections(trimmed) {
                narrator.say("note: nothing accepts connections at \(trimmed) yet; a phone cannot open its tunnel there until a relay runs")
            }
            return RelayInUse(url: trimmed, embedded: nil)
        case .embedded(let port):
            var relayConfiguration = RelayConfiguration()
            relayConfiguration.tunnelLifetime = max(.seconds(120), timeout + .seconds(60))
            relayConfiguration.idleTimeout = max(.seconds(60), timeout)
            relayConfiguration.faults = configuration.relayFaults
            // As `hybrid-sim relay` does: a connection past the cap gets a fast 503, where one past
            // the open-file limit would wait, unaccepted, for the phone's upgrade timeout.
            let limit = DescriptorLimit.raiseToHard()
            relayConfiguration.maxConnections = DescriptorLimit.embeddedRelayCap(relayConfiguration.maxConnections, under: limit)
            if relayConfiguration.maxConnections < RelayConfiguration().maxConnections, let limit {
                narrator.say(
                    "note: the open-file limit (ulimit -n) is \(limit): the embedded relay holds at most \(relayConfiguration.maxConnections) connection(s), more get a 503")
            }
            if configuration.relayFaults.isEnabled {
                let rules = configuration.relayFaults.rules.map(\.description).joined(separator: " ")
                narrator.say("note: the embedded relay injects faults: \(rules) (each is logged at --log-level info)")
            }
            let wanted = port ?? ProgramDefaults.relayPort
            do {
                let relay = TunnelRelay(
                    configuration: relayConfiguration,
                    host: "127.0.0.1",
                    port: wanted,
                    logger: logger
                )
                let endpoint = try await relay.start()
                narrator.say("embedded relay listening on \(endpoint.url)")
                return RelayInUse(url: endpoint.url, embedded: relay)
            } catch let error as RuntimeError where error.code == .bindFailed && port == nil {
                let relay = TunnelRelay(configuration: relayConfiguration, host: "127.0.0.1", port: 0, logger: logger)
                let endpoint: RelayEndpoint
                do {
                    endpoint = try await relay.start()
                } catch {
                    throw ProgramFailure(.network, "cannot start the embedded relay: \(error)")
                }
                narrator.say(
                    "note: port \(wanted) is in use; embedded relay listening on \(endpoint.url) instead "
                        + "(give the phone --relay \(endpoint.url))"
                )
                return RelayInUse(url: endpoint.url, embedded: relay)
            } catch let error as RuntimeError where error.code == .bindFailed {
                let advice = BindConflict.portAdvice(errno: error.systemErrno, port: wanted, flag: "--relay-port")
                throw ProgramFailure(.network, "cannot start the embedded relay on port \(wanted): \(error)\(advice)")
            } catch {
                throw ProgramFailure(.network, "cannot start the embedded relay on port \(wanted): \(error)")
            }
        }
    }

    /// The timeout's account of a wait in which no advert arrived while the embedded relay saw
    /// something: a tunnel opened (`/cable/new`, what a phone does before it advertises) or requests
    /// it refused (a phone that could not open its tunnel, say). `nil` when it saw neither, or for
    /// an external relay (`statistics` nil: its traffic is not this desktop's to see). The desktop
    /// itself opens no tunnel and sends no request before an advert, so all of it came from others.
    static func relaySighting(_ statistics: RelayStatistics?, relayURL: String, proximity: ProximityEndpoint) -> String? {
        guard let statistics else { return nil }
        let refused = statistics.rejectedRequests.values.reduce(0, +)
        var seen: [String] = []
        if statistics.tunnelsOpened > 0 {
            seen.append("had \(statistics.tunnelsOpened) tunnel(s) opened (/cable/new, as a phone does before it advertises)")
        }
        if refused > 0 {
            let statuses = statistics.rejectedRequests.sorted { $0.key < $1.key }.map { "HTTP \($0.key) ×\($0.value)" }
            seen.append("refused \(refused) request(s) (\(statuses.joined(separator: ", ")))")
        }
        guard !seen.isEmpty else { return nil }
        let advice =
            statistics.tunnelsOpened > 0
            ? "that phone's adverts went elsewhere, or it stopped before it sent one (was it given --proximity \(proximity)? its output says why)"
            : "a phone that could not open its tunnel there says why in its output"
        return "no advert arrived at \(proximity), but during the wait the embedded relay \(relayURL) "
            + seen.joined(separator: " and ") + ": " + advice
    }

    ///
    /// `linked`: a listening phone was started with where to advertise (`phone --listen
    /// --proximity`), so the scanner must be there: no free port instead of a taken default (the
    /// phone's adverts would go to whatever holds it; `--proximity-port 0` is refused before, by
    /// ``DesktopConfiguration``).
    func startScanner(eidKey: [UInt8], linked: Bool = false) async throws -> (ProximityScanner<[UInt8]>, ProximityEndpoint) {
        let matcher = ClientDriver.Transports.advertMatcher(eidKey: eidKey)
        let minRSSI = Int8(configuration.minRSSI)
        let wanted = configuration.proximityPort ?? ProgramDefaults.proximityPort
        let phoneSide = "the listening phone advertises to the --proximity it was started with (default udp://127.0.0.1:"
            + "\(ProgramDefaults.proximityPort))"
        let scanner = ProximityScanner<[UInt8]>(port: wanted, minRSSI: minRSSI, logger: logger, matcher: matcher)
        do {
            let endpoint = try await scanner.start()
            narrator.say("proximity scanner listening on \(endpoint) (accepting rssi ≥ \(minRSSI) dBm)")
            return (scanner, endpoint)
        } catch let error as RuntimeError where error.code == .bindFailed && linked {
            throw ProgramFailure(
                .network,
                "cannot start the proximity scanner on udp port \(wanted): \(error); \(phoneSide), so this desktop must "
                    + "scan there: end what holds the port (another desktop waiting?) and try again, or start the phone "
                    + "with --proximity udp://127.0.0.1:P and this desktop with --proximity-port P")
        } catch let error as RuntimeError where error.code == .bindFailed && configuration.proximityPort == nil {
            let fallback = ProximityScanner<[UInt8]>(port: 0, minRSSI: minRSSI, logger: logger, matcher: matcher)
            let endpoint: ProximityEndpoint
            do {
                endpoint = try await fallback.start()
            } catch {
                throw ProgramFailure(.network, "cannot start the proximity scanner: \(error)")
            }
            narrator.say(
                "note: udp port \(wanted) is in use; proximity scanner listening on \(endpoint) instead "
                    + "(give the phone --proximity \(endpoint)); accepting rssi ≥ \(minRSSI) dBm"
            )
            return (fallback, endpoint)
        } catch let error as RuntimeError where error.code == .bindFailed {
            throw ProgramFailure(
                .network,
                "cannot start the proximity scanner on udp port \(wanted): \(error); give another --proximity-port, or 0 for a free one")
        } catch {
            throw ProgramFailure(.network, "cannot start the proximity scanner on udp port \(wanted): \(error)")
        }
    }
}
