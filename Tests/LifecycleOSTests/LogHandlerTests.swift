@testable import LifecycleOS
import Logging
import Testing

@Suite struct JournalFieldTests {
    @Test func metadataKeysBecomeJournalFieldNames() {
        #expect(DaemonLogHandler.fieldName("app") == "APP")
        #expect(DaemonLogHandler.fieldName("app-pid") == "APP_PID")
        #expect(DaemonLogHandler.fieldName("from-state") == "FROM_STATE")
        #expect(DaemonLogHandler.fieldName("to-state") == "TO_STATE")
        #expect(DaemonLogHandler.fieldName("reason") == "REASON")
    }

    @Test func aPlainLineHasTheLevelTheMessageAndTheMetadataSortedByKey() {
        #expect(DaemonLogHandler.line("lifecycled", .notice, "a ended", [:]) == "lifecycled: notice: a ended\n")
        let line = DaemonLogHandler.line(
            "lifecycled", .warning, "x", ["reason": "crash", "app": "a", "pids": .array(["1", "2"])])
        #expect(line == "lifecycled: warning: x app=a pids=[\"1\", \"2\"] reason=crash\n")
        // What interpolation gave, before the line was built in one buffer.
        for level in Logger.Level.allCases {
            let m: Logger.Metadata = ["b": "2", "a": .string("1 2"), "c": .dictionary(["k": "v"])]
            var old = "lifecycled: \(level): m"
            for (k, v) in m.sorted(by: { $0.key < $1.key }) { old += " \(k)=\(v)" }
            #expect(DaemonLogHandler.line("lifecycled", level, "m", m) == old + "\n")
        }
    }

    @Test func prioritiesFollowSyslog() {
        #expect(DaemonLogHandler.priority(.error) == 3)
        #expect(DaemonLogHandler.priority(.notice) == 5)
        #expect(DaemonLogHandler.priority(.debug) == 7)
    }
}
