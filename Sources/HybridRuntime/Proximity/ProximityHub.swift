import NIOCore
import NIOPosix
import Synchronization

/// Two proximity-stub sockets kept open for many transactions, so that a transaction does not bind
/// and close a UDP socket of its own on each side: one socket scanners listen on, one socket
/// advertisers send from. ``HybridHarness`` keeps one for its lifetime (binding, registering and
/// closing two UDP sockets was about 4 % of the CPU of a `hybrid-sim bench` sign-in).
///
/// A scanner made with ``ProximityScanner/init(sharing:minRSSI:logger:matcher:)`` attaches to the
/// scan socket on ``ProximityScanner/start()`` and detaches on ``ProximityScanner/stop()``; every
/// datagram that arrives goes through the filters of every scanner attached at that moment, as every
/// nearby desktop hears every BLE advert, and each keeps its own counters and matches. An
/// advertiser made with ``ProximityAdvertiser/init(advert:configuration:sharing:logger:)`` sends
/// from the send socket and leaves it open when it stops. The `desktop` and `phone` programs bind
/// their own sockets as before.
final class ProximityHub: Sendable {
    /// Where the scan socket listens (what a shared advertiser aims at).
    let scanEndpoint: ProximityEndpoint
    /// The socket shared advertisers send from.
    let sendChannel: Channel
    private let scanChannel: Channel
    private let table: ScannerTable

    private init(scanEndpoint: ProximityEndpoint, scanChannel: Channel, sendChannel: Channel, table: ScannerTable) {
        self.scanEndpoint = scanEndpoint
        self.scanChannel = scanChannel
        self.sendChannel = sendChannel
        self.table = table
    }

    /// Binds both sockets on loopback (`127.0.0.1`, ephemeral ports) on `group`.
    ///
    /// - Throws: ``RuntimeError`` `.bindFailed`.
    static func start(group: any EventLoopGroup) async throws -> ProximityHub {
        let table = ScannerTable()
        let scanChannel: Channel
        do {
            scanChannel = try await ProximityScanHandler.bindSocket(
                to: SocketAddress(ipAddress: "127.0.0.1", port: 0), group: group) { table.deliver($0) }
        } catch {
            throw RuntimeError(.bindFailed, "proximity hub could not bind its scan socket: \(RuntimeError.systemReason(error))")
        }
        let sendChannel: Channel
        do {
            sendChannel = try await ProximityAdvertiser.bindSendSocket(localHost: "127.0.0.1", group: group)
        } catch {
            try? await scanChannel.close().get()
            throw RuntimeError(.bindFailed, "proximity hub could not bind its send socket: \(RuntimeError.systemReason(error))")
        }
        let endpoint = ProximityEndpoint(host: "127.0.0.1", port: scanChannel.localAddress?.port ?? 0)
        return ProximityHub(scanEndpoint: endpoint, scanChannel: scanChannel, sendChannel: sendChannel, table: table)
    }

    /// From now on, `core` filters every datagram the scan socket receives.
    func attach<Match>(_ core: ScannerCore<Match>) {
        table.scanners.withLock { $0[ObjectIdentifier(core)] = { core.process($0) } }
    }

    /// `core` hears nothing more.
    func detach<Match>(_ core: ScannerCore<Match>) {
        _ = table.scanners.withLock { $0.removeValue(forKey: ObjectIdentifier(core)) }
    }

    /// Scanners attached now.
    var attachedCount: Int { table.scanners.withLock { $0.count } }

    /// Datagrams the scan socket received since it was bound.
    var receivedCount: Int { table.received.load(ordering: .relaxed) }

    /// Whether both sockets are still open.
    var isOpen: Bool { scanChannel.isActive && sendChannel.isActive }

    /// Closes both sockets; attached scanners hear nothing more. Idempotent.
    func close() async {
        try? await scanChannel.close().get()
        try? await sendChannel.close().get()
    }

    /// The attached scanners, shared by the hub and its scan socket's handler.
    private final class ScannerTable: Sendable {
        let scanners = Mutex<[ObjectIdentifier: @Sendable ([UInt8]) -> Void]>([:])
        let received = Atomic<Int>(0)

        /// Runs `datagram` through every scanner attached now (outside the lock: a scanner's
        /// matcher may take its time).
        func deliver(_ datagram: [UInt8]) {
            received.add(1, ordering: .relaxed)
            let receivers = scanners.withLock { Array($0.values) }
            for receive in receivers { receive(datagram) }
        }
    }
}
