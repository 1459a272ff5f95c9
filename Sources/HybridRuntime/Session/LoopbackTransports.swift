import HybridCore
import Logging
import NIOCore
import NIOPosix
import Synchronization

extension ProximityAdvertiser: AuthenticatorDriver.Advertisement {}

extension ClientDriver.Transports {
    /// The desktop's real transports: adverts from a running ``ProximityScanner`` and WebSocket
    /// connections to the relay at `relayURL` (`ws://HOST:PORT`). Every valid tunnel domain ID maps
    /// to that one relay, as webauthn-rs's tunnel override does (Docs/CLI.md, "Defaults and extras").
    /// The connections run on `group`.
    public static func loopback(
        relayURL: String, scanner: ProximityScanner<[UInt8]>,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.desktop")
    ) -> Self {
        Self(
            nextAdvert: { timeout in
                let found = try await scanner.waitForMatchCountingIgnored(timeout: timeout)
                return (advert: found.match, rssi: found.rssi, ignored: found.ignoredBefore)
            },
            connect: { path, _, timeout in
                try await WebSocketTunnel.open(url: relayURL + path, timeout: timeout, group: group, logger: logger)
            })
    }

    /// The matcher a desktop's scanner needs: passes on the adverts that authenticate under
    /// `eidKey` with a valid plaintext (Chromium `eid::Decrypt`); one that authenticates but breaks
    /// a plaintext rule (reserved byte, unknown domain) is ``ProximityScanner/Verdict/invalid(reason:)``,
    /// ignored as Chromium ignores it, and everything else is not ours.
    public static func advertMatcher(eidKey: [UInt8]) -> ProximityScanner<[UInt8]>.Matcher {
        let cipher = AdvertCipher(eidKey: eidKey)
        return { advert in
            switch cipher.decrypt(advert: advert) {
            case .matched: return .matched(advert)
            case .rejected(let error): return .invalid(reason: error.reason)
            case .notOurs: return .notOurs
            }
        }
    }
}

extension AuthenticatorDriver.Transports {
    /// The phone's real transports: `/cable/new` on the relay at `relayURL` and a UDP advertiser
    /// aimed at the desktop's scanner, both on `group`.
    public static func loopback(
        relayURL: String, proximity: ProximityEndpoint, rssi: Int8 = ProximityDefaults.rssi,
        serviceUUID: ProximityServiceUUID = .fido, advertInterval: Duration = ProximityDefaults.advertInterval,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "hybrid-sim.phone")
    ) -> Self {
        loopback(
            relayURL: relayURL, proximity: proximity, rssi: rssi, serviceUUID: serviceUUID,
            advertInterval: advertInterval, group: group, logger: logger, hub: nil)
    }

    /// ``loopback(relayURL:proximity:rssi:serviceUUID:advertInterval:group:logger:)``, advertising
    /// from `hub`'s send socket to `hub`'s scan socket when a hub is given (``ProximityHub``).
    static func loopback(
        relayURL: String, proximity: ProximityEndpoint, rssi: Int8, serviceUUID: ProximityServiceUUID,
        advertInterval: Duration, group: any EventLoopGroup, logger: Logger, hub: ProximityHub?
    ) -> Self {
        // The tunnel the advert announces: an advert nothing receives (ECONNREFUSED) ends its wait
        // for the desktop's handshake at once, with the advertiser's reason, not at the timeout.
        let opened = OpenedTunnel()
        return Self(
            createTunnel: { path, timeout in
                let tunnel = try await WebSocketTunnel.open(url: relayURL + path, timeout: timeout, group: group, logger: logger)
                guard let routingID = tunnel.routingID, routingID.count == HybridConstants.routingIDSize else {
                    await tunnel.close()
                    throw RuntimeError(.protocolViolation, "the tunnel service did not assign a routing ID (X-caBLE-Routing-ID)")
                }
                opened.tunnel.withLock { $0 = tunnel }
                return (tunnel, routingID)
            },
            advertise: { advert in
                var configuration = ProximityAdvertiser.Configuration(target: proximity)
                configuration.rssi = rssi
                configuration.serviceUUID = serviceUUID
                configuration.interval = advertInterval
                let tunnel = opened.tunnel.withLock { $0 }
                configuration.onUnreachable = { error in tunnel?.end(with: error) }
                let advertiser =
                    if let hub {
                        try ProximityAdvertiser(advert: advert, configuration: configuration, sharing: hub, logger: logger)
                    } else {
                        try ProximityAdvertiser(advert: advert, configuration: configuration, group: group, logger: logger)
                    }
                try await advertiser.start()
                return advertiser
            })
    }
}

/// The tunnel a phone's transports opened last, for its advertiser to end (``ProximityAdvertiser/Configuration/onUnreachable``).
private final class OpenedTunnel: Sendable {
    let tunnel = Mutex<WebSocketTunnel?>(nil)
}
