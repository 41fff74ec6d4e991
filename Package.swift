// swift-tools-version: 6.0
//
// The layout of the package is the architecture (see docs/architecture.md):
//
//   LifecycleModel     the vocabulary, defined once: states, events and their wire codes, modes,
//                      termination codes, memory levels and bands, launch-option keys
//   LifecycleCore      pure state machine: inputs in, effects out, no clock, no syscalls
//   LifecycleWire      the app-channel wire format, shared by the daemon and every client
//   LifecycleControl   the control-socket protocol (JSON lines) and a client for it
//   CLifecycleShim     tiny C shim: clone3 into a cgroup, pidfd, credentials
//   CLifecycleHeader   the C client's public header (clib/include/lifecycle.h), for the
//                      test that holds its constants to LifecycleModel's and LifecycleWire's
//   CSystemd           libsystemd (sd-event, sd-daemon, sd-journal; sd-bus for the follower)
//   CSystemdBus        the few systemd D-Bus calls (sd-bus): the apps' transient scope, job types
//   CSQLite            SQLite, where the daemon keeps its state for the next one
//   CMemoryWatch       the quiet half of memory sampling, in C, on the sd-event loop
//   LifecycleOS        thin typed adapters over the kernel and systemd
//   LifecycleDaemon    the daemon shell: config, event loop, app channels, control server
//   LifecycleClient    the Swift client library apps link
//   LifecycleFollow    the compositor's follower: sway's IPC read, snapshots reported (docs/focus.md)
//   LifecycleTestKit   a real daemon under test, for end-to-end tests and benchmarks
//   lifecycled, supervisorctl, lifecycled-follow, example-*, lifecycled-bench   executables
import PackageDescription

let strict: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]
// The daemon's rooms see only the members of modules they import: TOMLKit's own
// `import Foundation` would otherwise lend them Foundation's String methods, and
// one such call links all of swift-corelibs-foundation and ICU into the static
// daemon (docs/performance.md, small binaries).
let daemon = strict + [.enableUpcomingFeature("MemberImportVisibility")]

let package = Package(
    name: "lifecycled",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "lifecycled", targets: ["lifecycled"]),
        .executable(name: "supervisorctl", targets: ["supervisorctl"]),
        .executable(name: "lifecycled-follow", targets: ["lifecycled-follow"]),
        .library(name: "LifecycleClient", targets: ["LifecycleClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/apple/swift-system", from: "1.4.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
    ],
    targets: [
        .target(name: "LifecycleModel", swiftSettings: strict),
        .target(name: "LifecycleCore", dependencies: ["LifecycleModel"], swiftSettings: strict),
        .target(name: "LifecycleWire", dependencies: ["LifecycleModel"], swiftSettings: strict),
        .target(name: "LifecycleControl", dependencies: ["LifecycleModel"], swiftSettings: strict),
        .target(name: "CLifecycleShim"),
        // clib/ is built by the Makefile (make clib); this target only lets Swift
        // read its header. wire.c is its one source because a C target needs one.
        .target(
            name: "CLifecycleHeader", path: "clib",
            exclude: ["src/lifecycle.c", "tests", "lifecycle.pc.in"],
            sources: ["src/wire.c"], publicHeadersPath: "include"),
        .systemLibrary(
            name: "CSystemd", pkgConfig: "libsystemd",
            providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        .target(name: "CMemoryWatch", dependencies: ["CSystemd"]),
        .target(name: "CSystemdBus", dependencies: ["CSystemd"]),
        .target(
            name: "LifecycleOS",
            dependencies: [
                "LifecycleModel", "CLifecycleShim", "CSystemd", "CSystemdBus", "CMemoryWatch", "CSQLite",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ], swiftSettings: daemon),
        .target(
            name: "LifecycleDaemon",
            dependencies: [
                "LifecycleCore", "LifecycleWire", "LifecycleControl", "LifecycleOS",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ], swiftSettings: daemon),
        .target(name: "LifecycleClient", dependencies: ["LifecycleWire"], swiftSettings: strict),
        .target(
            name: "LifecycleFollow", dependencies: ["LifecycleControl", "CLifecycleShim", "CSystemd"],
            swiftSettings: strict),
        .executableTarget(
            name: "lifecycled-follow",
            dependencies: [
                "LifecycleFollow", "LifecycleControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], swiftSettings: strict),
        .executableTarget(
            name: "lifecycled",
            dependencies: [
                "LifecycleDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], swiftSettings: strict),
        .executableTarget(
            name: "supervisorctl",
            dependencies: [
                "LifecycleControl",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ], swiftSettings: strict),
        .executableTarget(
            name: "example-recorder", dependencies: ["LifecycleClient"],
            path: "Examples/recorder", swiftSettings: strict),
        .executableTarget(
            name: "example-saver", dependencies: ["LifecycleClient"],
            path: "Examples/saver", swiftSettings: strict),
        .executableTarget(
            name: "example-news", dependencies: ["LifecycleClient"],
            path: "Examples/news", swiftSettings: strict),
        .executableTarget(
            name: "example-worker", dependencies: ["LifecycleClient"],
            path: "Examples/worker", swiftSettings: strict),
        .executableTarget(name: "example-plain", path: "Examples/plain", swiftSettings: strict),
        // The test kit for its seeded random source, LifecycleControl for the encoder the
        // daemon writes its rows with (the simulation restores from them): the core stays pure.
        .testTarget(
            name: "LifecycleCoreTests", dependencies: ["LifecycleCore", "LifecycleTestKit", "LifecycleControl"],
            swiftSettings: strict),
        .testTarget(
            name: "LifecycleWireTests", dependencies: ["LifecycleWire", "CLifecycleHeader"],
            swiftSettings: strict),
        .testTarget(
            name: "LifecycleClientTests", dependencies: ["LifecycleClient", "LifecycleWire"],
            swiftSettings: strict),
        // The shell against fakes (no kernel): config, the command front, the effect performer.
        .testTarget(
            name: "LifecycleDaemonTests",
            dependencies: [
                "LifecycleDaemon", "LifecycleOS", "LifecycleControl", "LifecycleCore", "LifecycleWire",
                "LifecycleTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strict),
        // The OS adapters against the real kernel: memory probes and the sentinel, journal fields.
        .testTarget(
            name: "LifecycleOSTests",
            dependencies: [
                "LifecycleOS", "CMemoryWatch", "CSystemd", "LifecycleTestKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "SystemPackage", package: "swift-system"),
            ], swiftSettings: strict),
        .target(
            name: "LifecycleTestKit", dependencies: ["LifecycleControl", "LifecycleOS", "CLifecycleShim"],
            swiftSettings: strict),
        .executableTarget(
            name: "lifecycled-bench",
            dependencies: [
                "LifecycleTestKit", "LifecycleControl", "LifecycleOS", "CLifecycleShim", "LifecycleWire",
                "LifecycleCore",
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ], path: "Benchmarks",
            // Benchmarks/memory is a C + Python harness (hog.c, reaction.py), memory-vm/ the same in a
            // virtual machine (make bench-memory-vm), Benchmarks/systemd a script run inside
            // systemd-nspawn (make bench-systemd), hostile/, output/, status/, dbus/, focus/ and lib/ Python: not
            // this target.
            exclude: [
                "memory", "memory-vm", "systemd", "hostile", "output", "status", "lib", "dbus", "focus", "counted",
            ],
            swiftSettings: strict),
        .testTarget(
            name: "EndToEndTests",
            dependencies: [
                "LifecycleTestKit", "LifecycleControl", "LifecycleWire", "LifecycleOS", "CLifecycleShim",
            ], swiftSettings: strict),
    ],
    swiftLanguageModes: [.v6]
)
