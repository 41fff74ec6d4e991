#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS

/// Where records go besides the history: the control socket's followers
/// today, a D-Bus signal or a journal stream later.
protocol RecordSink: AnyObject {
    /// False while no one listens: records are then not even built.
    var wantsRecords: Bool { get }
    func deliver(_ record: EventRecord)
}

/// Every transition, delivery, acknowledgement and kill as an EventRecord:
/// the last `keep` kept for `supervisorctl events`, each handed to the sinks.
final class Records {
    let keep: Int
    private(set) var history: [EventRecord] = []
    var sinks: [any RecordSink] = []

    init(keep: Int) { self.keep = keep }

    /// Whether a record made now would go anywhere.
    var wanted: Bool { keep > 0 || sinks.contains { $0.wantsRecords } }

    func append(_ record: EventRecord) {
        if keep > 0 {
            history.append(record)
            // Trimmed in batches: removing from the front is O(n).
            if history.count > keep + keep / 4 { history.removeFirst(history.count - keep) }
        }
        for sink in sinks where sink.wantsRecords { sink.deliver(record) }
    }

    func recent(apps filter: Set<AppID>) -> [EventRecord] {
        history.suffix(keep).filter { filter.isEmpty || filter.contains($0.app) }
    }

}
