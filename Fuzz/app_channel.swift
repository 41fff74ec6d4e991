// libFuzzer target: the app-channel decoders (Sources/LifecycleWire/Wire.swift),
// built by scripts/fuzz.sh with `swiftc -sanitize=fuzzer,address`.
// Property: whatever decodes re-encodes to exactly the same bytes (there is
// one way to write each message), and nothing crashes or traps.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAppChannel(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    if let m = try? AppMessage.decode(bytes), m.encoded() != bytes {
        fatalError("app message \(m) re-encodes to other bytes")
    }
    if let m = try? DaemonMessage.decode(bytes), m.encoded() != bytes {
        fatalError("daemon message \(m) re-encodes to other bytes")
    }
    return 0
}
