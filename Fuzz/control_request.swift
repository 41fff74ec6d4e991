// libFuzzer target: the control socket's request parser, exactly as the
// daemon's ControlServer parses a line (Sources/LifecycleControl/ControlProtocol.swift).
// Property: a request that parses survives encoding and parsing again, and
// nothing crashes or traps.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControlRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let line = Data(bytes: data, count: size)
    guard let request = try? JSONDecoder().decode(ControlRequest.self, from: line) else { return 0 }
    guard let encoded = try? JSONEncoder().encode(request),
        let again = try? JSONDecoder().decode(ControlRequest.self, from: encoded), again == request
    else {
        fatalError("request \(request) does not survive a round trip")
    }
    return 0
}
