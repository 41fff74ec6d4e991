// libFuzzer target: the hand-written reader of the status answer, exactly as
// supervisorctl reads one (Sources/LifecycleControl/StatusJSON.swift and
// StatusFields.swift). Properties: nothing traps (a negative in an unsigned
// field, an overflow, a truncation); a status it reads, written again by the
// daemon's writer, reads back the same, and JSONDecoder reads the same.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzStatusReader(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    guard let report = StatusReport.fromResponseLine(bytes) else { return 0 }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    guard let line = try? report.responseLine(),
        let again = StatusReport.fromResponseLine(line),
        let decoded = try? JSONDecoder().decode(ControlResponse.self, from: Data(line)).status,
        let want = try? encoder.encode(report.apps),
        (try? encoder.encode(again.apps)) == want, (try? encoder.encode(decoded.apps)) == want
    else {
        fatalError("status \(report) does not survive being written and read again")
    }
    return 0
}
