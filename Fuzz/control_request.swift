// libFuzzer target: the control socket's request parser, exactly as the
// daemon's ControlServer parses a line (Sources/LifecycleControl/ControlProtocol.swift).
// Properties: a request that parses survives encoding and parsing again;
// a line the hand reader takes (RequestJSON.swift) JSONDecoder takes too,
// as the same request; nothing crashes or traps.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControlRequest(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let line = Data(bytes: data, count: size)
    let decoded = try? JSONDecoder().decode(ControlRequest.self, from: line)
    if let plain = ControlRequest.readPlain(Array(line)), plain != decoded {
        fatalError("read by hand as \(plain), by JSONDecoder as \(String(describing: decoded))")
    }
    guard let request = decoded else { return 0 }
    guard let encoded = try? JSONEncoder().encode(request),
        let again = try? JSONDecoder().decode(ControlRequest.self, from: encoded), again == request
    else {
        fatalError("request \(request) does not survive a round trip")
    }
    return 0
}
