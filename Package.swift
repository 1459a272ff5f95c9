// swift-tools-version: 6.1
//
// HybridSim: the FIDO CTAP 2.2 hybrid transport (caBLE v2) on one machine.
// See Docs/ARCHITECTURE.md for what each target is for.

import PackageDescription

let package = Package(
    name: "HybridSim",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "CTAP2", targets: ["CTAP2"]),
        .library(name: "HybridCore", targets: ["HybridCore"]),
        .library(name: "HybridQR", targets: ["HybridQR"]),
        .library(name: "HybridInspect", targets: ["HybridInspect"]),
        .library(name: "HybridRuntime", targets: ["HybridRuntime"]),
        .library(name: "HybridSim", targets: ["HybridSim"]),
        .executable(name: "hybrid-sim", targets: ["hybrid-sim"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // AsyncHTTPClient's TLS, named for `desktop --rp-ca` (its trust roots) and its errors' words.
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        // X.509 parsing and signatures for packed full attestation (`x5c`, Docs/CTAP2.md); swift-nio-ssl
        // already resolves both packages.
        .package(url: "https://github.com/apple/swift-certificates.git", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        // Documentation only: `swift package generate-documentation` (Docs/ARCHITECTURE.md).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // MARK: Pure protocol core (no I/O)

        /// CTAP2 canonical CBOR, CTAP2 messages, WebAuthn client data, byte encodings.
        .target(
            name: "CTAP2",
            dependencies: [
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),  // packed x5c (WebAuthn §8.2.1)
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        /// The hybrid (caBLE v2) wire layer and the client/authenticator state machines.
        .target(
            name: "HybridCore",
            dependencies: [
                "CTAP2",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),  // SimulatedAttestationCA
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),

        /// Takes tunnel recordings apart (`hybrid-sim inspect`): decoding, anomalies, sequence diagrams. No I/O.
        .target(
            name: "HybridInspect",
            dependencies: ["HybridCore", "CTAP2", .product(name: "Crypto", package: "swift-crypto")]
        ),

        // MARK: Files the user names, and child processes (POSIX; CHybridLinux for a glibc call)

        /// Whole-file reads with a size cap and a quiet limit for pipes, shared by QR input, option
        /// files, recordings and the stores; child processes started with posix_spawn.
        .target(name: "HybridFiles", dependencies: ["CHybridLinux"]),

        // MARK: QR codes (libqrencode + libzbar)

        .systemLibrary(name: "CQRencode", pkgConfig: "libqrencode", providers: [.apt(["libqrencode-dev"])]),
        .systemLibrary(name: "CZbar", pkgConfig: "zbar", providers: [.apt(["libzbar-dev"])]),
        .systemLibrary(name: "CPNG", pkgConfig: "libpng", providers: [.apt(["libpng-dev"])]),
        /// QR symbol encoding, terminal/PNG/SVG rendering, and scanning with a real decoder.
        .target(name: "HybridQR", dependencies: ["HybridCore", "HybridFiles", "CQRencode", "CZbar", "CPNG"]),

        // MARK: Networked runtime (SwiftNIO, loopback)

        /// Linux calls not in Swift's Glibc module (epoll, accept4), for the relay dispatcher.
        .systemLibrary(name: "CHybridLinux", path: "Sources/CHybridLinux"),

        /// Tunnel relay, WebSocket client transport, proximity stub, session drivers, test harness.
        .target(
            name: "HybridRuntime",
            dependencies: [
                "HybridCore",
                "CTAP2",
                "HybridFiles",
                "CHybridLinux",
                .product(name: "Crypto", package: "swift-crypto"),  // the benchmark times swift-crypto itself
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),  // RelayRequestProbe (fuzzing)
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Product (desktop, phone, relying party, demo)

        /// The desktop (browser + relying party) and phone (authenticator) programs as library entry points.
        .target(
            name: "HybridSim",
            dependencies: [
                "CTAP2", "HybridCore", "HybridFiles", "HybridQR", "HybridRuntime",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),  // `desktop --rp-url`
                .product(name: "NIOSSL", package: "swift-nio-ssl"),  // `desktop --rp-ca`
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),  // `hybrid-sim rp`
                .product(name: "NIOEmbedded", package: "swift-nio"),  // RelyingPartyRequestProbe (fuzzing)
                .product(name: "X509", package: "swift-certificates"),  // AttestationObject: a packed x5c's key
            ]
        ),
        /// The `hybrid-sim` command: argument parsing only.
        .executableTarget(
            name: "hybrid-sim",
            dependencies: [
                "HybridSim", "HybridQR", "HybridRuntime", "HybridCore", "CTAP2", "HybridInspect", "HybridFiles",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // MARK: Fuzzing (Docs/ROBUSTNESS.md)

        /// libFuzzer's driver entry point, weakly referenced so builds without libFuzzer still link.
        .target(name: "CHybridFuzz"),
        /// One fuzz target per parser, each checking its invariant; shared by `hybrid-fuzz` and the tests.
        .target(name: "HybridFuzz", dependencies: ["CTAP2", "HybridCore", "HybridRuntime", "HybridSim", "HybridInspect"]),
        /// `hybrid-fuzz TARGET [libFuzzer flags]` (`Scripts/fuzz` links libFuzzer into it).
        .executableTarget(name: "hybrid-fuzz", dependencies: ["HybridFuzz", "CHybridFuzz"]),

        // MARK: Tests

        /// Shared test support: the `Vectors/` loader, hex literals, attestation certificates. Not a product.
        .target(
            name: "HybridTestSupport",
            dependencies: [
                "CTAP2",
                // TestAttestationPKI: attestation certificates for packed x5c tests
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        /// Test support for the product: an independent checker of printed WebAuthn JSON. Not a product.
        .target(name: "HybridSimTestSupport", dependencies: ["HybridSim", "CTAP2"]),

        .testTarget(name: "HybridFilesTests", dependencies: ["HybridFiles"]),
        .testTarget(
            name: "CTAP2Tests",
            dependencies: [
                "CTAP2", "HybridTestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),  // attestation certificates made in tests
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ]
        ),
        .testTarget(
            name: "HybridCoreTests",
            dependencies: ["HybridCore", "CTAP2", "HybridTestSupport", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "HybridQRTests",
            dependencies: [
                "HybridQR", "HybridCore", "HybridFiles", "HybridTestSupport", .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Captures"]  // real tmux captures, read via #filePath
        ),
        .testTarget(
            name: "HybridRuntimeTests",
            dependencies: [
                "HybridRuntime", "HybridCore", "CTAP2", "HybridTestSupport",
                "HybridFiles",  // ChildSpawn: the child processes RelayCLITests and ProcessProbeTests start
                .product(name: "NIOPosix", package: "swift-nio"),  // RelayShardingTests: a two-loop group
                // MessageAssemblerTests: the relay's frame joining against NIO's aggregator
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOWebSocket", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "HybridInspectTests",
            dependencies: ["HybridInspect", "HybridRuntime", "HybridCore", "CTAP2", "HybridTestSupport"]
        ),
        .testTarget(
            name: "HybridSimTests",
            dependencies: [
                "HybridSim", "HybridQR", "HybridCore", "CTAP2", "HybridTestSupport", "HybridSimTestSupport", "HybridRuntime",
                "HybridFiles",
                // RelyingPartyTLSTests: an https relying party with the test CA's certificate
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: ["Fixtures"]
        ),
        .testTarget(name: "HybridFuzzTests", dependencies: ["HybridFuzz"]),
    ],
    swiftLanguageModes: [.v6]
)
