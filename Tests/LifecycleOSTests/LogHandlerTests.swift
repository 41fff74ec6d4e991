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

    @Test func prioritiesFollowSyslog() {
        #expect(DaemonLogHandler.priority(.error) == 3)
        #expect(DaemonLogHandler.priority(.notice) == 5)
        #expect(DaemonLogHandler.priority(.debug) == 7)
    }
}
