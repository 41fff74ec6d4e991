import Foundation
import LifecycleControl
import LifecycleCore
@testable import LifecycleDaemon
import LifecycleOS
import LifecycleTestKit
import Testing

/// The state a daemon leaves for the next one: bad or foreign files are set
/// aside with a reason, never trusted and never fatal; a save writes what
/// changed; a full disk loses nothing once it has room again.
@Suite struct StateStoreTests {
    func directory() -> String { scratchDirectory("state") }

    func state(apps count: Int, running: Set<Int> = []) -> SavedDaemon {
        var policies: [AppID: AppPolicy] = [:]
        for i in 0..<count { policies["app\(i)"] = AppPolicy() }
        var runs: [AppID: SavedRun] = [:]
        for i in running {
            runs["app\(i)"] = SavedRun(
                generation: 1, pid: Int32(1000 + i), startTime: 42, notifyName: nil, statusLine: nil,
                lastEvent: nil)
        }
        return SavedDaemon(
            bootID: StateStore.bootID(), core: Supervisor(apps: policies).saved, runs: runs, terminations: [:])
    }

    /// Three apps, one running, one that ended.
    func threeApps() -> SavedDaemon {
        var saved = state(apps: 3, running: [1])
        saved.terminations["app2"] = TerminationInfo(reason: .signaled, description: "signaled", time: 1, pid: 7)
        return saved
    }

    @Test func aSavedStateComesBackAndOneFromAnotherBootDoesNot() throws {
        let dir = directory()
        var saved = threeApps()
        do {
            let s = StateStore(directory: dir)
            #expect(try s.load().0 == nil)
            #expect(s.save(saved) == nil)
            s.close()
        }
        do {
            let s = StateStore(directory: dir)
            let back = try #require(try s.load().0)
            #expect(back.runs == saved.runs && back.terminations == saved.terminations)
            #expect(back.core.perApp == saved.core.perApp)
            saved.bootID = "another-boot"
            #expect(s.save(saved) == nil)
            s.close()
        }
        let (back, problem) = try StateStore(directory: dir).load()
        #expect(back == nil && problem?.contains("is from an earlier boot") == true, "\(problem ?? "")")
    }

    /// The reason for the store: with 1,000 apps a step writes the one row
    /// it changed, not 1,000; the core names the apps whose part changed.
    @Test func aSaveWritesOnlyTheAppsThatChanged() throws {
        let dir = directory()
        let s = StateStore(directory: dir)
        _ = try s.load()
        var saved = state(apps: 1000)
        #expect(s.save(saved, changed: []) == nil)
        #expect(s.rowsWritten == 1000, "the first save after a load compares every app")
        #expect(s.save(saved, changed: []) == nil)
        #expect(s.rowsWritten == 0)
        // The daemon's tables name the apps whose run or termination changed.
        saved.runs["app7"] = SavedRun(
            generation: 1, pid: 77, startTime: 1, notifyName: "n", statusLine: nil, lastEvent: nil)
        #expect(s.save(saved, changed: ["app7"]) == nil)
        #expect(s.rowsWritten == 1)
        saved.runs["app7"] = nil
        saved.terminations["app7"] = TerminationInfo(reason: .exited, description: "exited", time: 2, pid: 77)
        #expect(s.save(saved, changed: ["app7"]) == nil)
        #expect(s.rowsWritten == 1)
        #expect(s.save(saved, changed: ["app7", "app8"]) == nil)
        #expect(s.rowsWritten == 0, "named but the same as the file: not written")
        // A change in the core, named by it.
        var core = Supervisor(apps: Dictionary(uniqueKeysWithValues: (0..<1000).map { ("app\($0)", AppPolicy()) }))
        _ = core.takeChanged()
        _ = core.handle(.launch("app9", .background), now: .zero)
        saved.core = core.saved
        #expect(s.save(saved, changed: core.takeChanged()) == nil)
        #expect(s.rowsWritten == 1)
        s.close()
        let back = try #require(
            try StateStore(directory: dir).load().0)
        #expect(back.runs.isEmpty && back.terminations["app7"]?.pid == 77 && back.core.perApp.count == 1000)
        #expect(back.core.perApp == core.saved.perApp)
    }

    /// The shared part is written from its parts (the clock, the front, the
    /// memory policy's), each encoded again only when it changed: whichever
    /// part a step changed, the file holds the whole as it now is.
    @Test func theSharedPartReadsBackWholeWhicheverPartChanged() throws {
        func json(_ shared: CoreState.Shared) throws -> Data {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            return try encoder.encode(shared)
        }
        let warning = MemoryReading(available: (1 << 34) / 100 * 15, total: 1 << 34)
        let steps: [(String, Input)] = [
            ("the clock", .tick), ("the front", .activate("a")),
            ("the memory part", .memory(MemoryReport(measurements: warning))),
        ]
        for (i, (part, input)) in steps.enumerated() {
            let dir = directory()
            let s = StateStore(directory: dir)
            _ = try s.load()
            var core = Supervisor(apps: ["a": AppPolicy(), "b": AppPolicy()])
            var saved = SavedDaemon(bootID: StateStore.bootID(), core: core.saved, runs: [:], terminations: [:])
            #expect(s.save(saved) == nil)
            let before = try json(core.saved.shared)
            _ = core.handle(input, now: Instant(nanoseconds: Int64(i + 1) * 1_000_000_000))
            saved.core = core.saved
            #expect(try json(saved.core.shared) != before, "the step changes \(part)")
            #expect(s.save(saved, changed: core.takeChanged()) == nil)
            s.close()
            let back = try #require(try StateStore(directory: dir).load().0)
            #expect(try json(back.core.shared) == json(saved.core.shared), "\(part) changed")
        }
    }

    /// A restore after a crash opens a gap in every running app's numbering
    /// in memory only: the next save writes no row for it (with 1,000 apps
    /// that write was a fifth of a restart), and a second crash before the
    /// row is written opens the first gap again and one more.
    @Test func aRestoreAfterACrashWritesNoRowAndNumbersOnlyGrow() throws {
        let dir = directory()
        let policies = Dictionary(uniqueKeysWithValues: (0..<100).map { ("app\($0)", AppPolicy()) })
        var core = Supervisor(apps: policies)
        for i in 0..<100 { _ = core.handle(.launch("app\(i)", .background), now: .zero) }
        var saved = state(apps: 100)
        saved.core = core.saved
        let first = core.saved.app("app1")!
        do {
            let s = StateStore(directory: dir)
            _ = try s.load()
            #expect(s.save(saved) == nil)
            s.close()
        }
        /// One daemon's start after a crash, as the daemon does it.
        func restart() throws -> (StateStore, Supervisor) {
            let s = StateStore(directory: dir)
            let back = try #require(try s.load().0)
            #expect(s.countCrash() == nil)
            let restored = Supervisor(
                restoring: back.core, foregroundSlots: 1, apps: policies, afterCrash: true,
                crashesMissed: s.crashesMissed)
            s.restored(afterCrash: true)
            return (s, restored)
        }
        var (s, restored) = try restart()
        #expect(restored.saved.app("app1") == first.afterCrashes(1))
        saved.core = restored.saved
        #expect(s.save(saved, changed: restored.takeChanged()) == nil)
        #expect(s.rowsWritten == 0, "nothing but the numbering changed")
        // app2 changes and is written with the count; app1 is not.
        _ = restored.handle(.stop("app2"), now: restored.now)
        saved.core = restored.saved
        #expect(s.save(saved, changed: restored.takeChanged()) == nil)
        #expect(s.rowsWritten == 1)
        let app2 = restored.saved.app("app2")!
        s.close()
        (s, restored) = try restart()
        #expect(s.crashesMissed["app1"] == 1 && s.crashesMissed["app2"] == nil)
        #expect(restored.saved.app("app1") == first.afterCrashes(2), "past the first restore's gap")
        #expect(restored.saved.app("app2") == app2.afterCrashes(1))
        saved.core = restored.saved
        #expect(s.save(saved, changed: restored.takeChanged()) == nil)
        #expect(s.rowsWritten == 0)
        s.close()
    }

    /// An app that is no longer configured loses its row at the first save
    /// after a load (the next daemon would otherwise meet it again).
    @Test func anAppNoLongerKnownLosesItsRow() throws {
        let dir = directory()
        do {
            let s = StateStore(directory: dir)
            _ = try s.load()
            #expect(s.save(state(apps: 3)) == nil)
            s.close()
        }
        let s = StateStore(directory: dir)
        #expect(try s.load().0?.core.perApp.count == 3)
        #expect(s.save(state(apps: 2), changed: []) == nil)
        #expect(s.rowsWritten == 1)
        s.close()
        #expect(try StateStore(directory: dir).load().0?.core.perApp.keys.sorted() == ["app0", "app1"])
    }

    /// Policies are not saved: after a restart the live core (with the
    /// configured policies) and the rows read back (without) are the same
    /// saved state, and the first save writes nothing.
    @Test func configuredPoliciesDoNotMakeEveryRowChange() throws {
        let dir = directory()
        var policy = AppPolicy()
        policy.launchTimeout = .seconds(9)
        let live = SavedDaemon(
            bootID: StateStore.bootID(),
            core: Supervisor(apps: Dictionary(uniqueKeysWithValues: (0..<50).map { ("app\($0)", policy) })).saved,
            runs: [:], terminations: [:])
        do {
            let s = StateStore(directory: dir)
            _ = try s.load()
            #expect(s.save(live) == nil)
            s.close()
        }
        let s = StateStore(directory: dir)
        #expect(try s.load().0 != nil)
        #expect(s.save(live, changed: Set(live.core.appIDs)) == nil)
        #expect(s.rowsWritten == 0)
    }

    /// A state.json beside a state.db that cannot be opened: the JSON is
    /// read, the database set aside and written afresh.
    @Test func aStateJSONBesideABrokenDatabaseIsStillRead() throws {
        let dir = directory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        try JSONEncoder().encode(state(apps: 2, running: [1])).write(to: URL(fileURLWithPath: dir + "/state.json"))
        #expect(FileManager.default.createFile(atPath: dir + "/state.db", contents: Data("not a database".utf8)))
        let s = StateStore(directory: dir)
        let back = try #require(try s.load().0)
        #expect(back.runs.keys.sorted() == ["app1"])
        #expect(FileManager.default.fileExists(atPath: dir + "/state.db.unreadable"))
        #expect(s.save(back) == nil)
        s.close()
        #expect(try StateStore(directory: dir).load().0?.runs.keys.sorted() == ["app1"])
    }

    @Test func aFileThatDoesNotDecodeIsSetAsideWithItsReason() throws {
        let dir = directory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: dir + "/state.db", contents: Data("not a database".utf8)))
        let s = StateStore(directory: dir)
        let (saved, problem) = try s.load()
        #expect(saved == nil)
        #expect(
            problem?.contains("\(dir)/state.db") == true && problem?.contains("unreadable") == true, "\(problem ?? "")")
        #expect(FileManager.default.fileExists(atPath: dir + "/state.db.unreadable"))
        #expect(s.save(state(apps: 1)) == nil, "the daemon carries on with a fresh file")
    }

    /// An upgrade from a daemon of format 2, whose rows were in `apps`, a
    /// WITHOUT ROWID table: read as they are, moved to `app_rows`, and the
    /// file says format 3 from then on.
    @Test func aFileOfTheFormatBeforeIsReadAndMovedToTheNewTable() throws {
        let dir = directory()
        let saved = threeApps()
        do {
            let s = StateStore(directory: dir)
            _ = try s.load()
            #expect(s.save(saved) == nil)
            s.close()
        }
        func meta(_ db: Database, _ key: String) throws -> String? {
            try db.prepare("SELECT value FROM meta WHERE key = CAST('\(key)' AS BLOB)").run().first.map {
                String(decoding: $0[0], as: UTF8.self)
            }
        }
        func tables(_ db: Database) throws -> [String] {
            try db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").run().map {
                String(decoding: $0[0], as: UTF8.self)
            }
        }
        do {  // the file as a daemon of format 2 left it
            let db = try Database(path: dir + "/state.db")
            #expect(try meta(db, "format") == "3")
            try db.execute(
                """
                CREATE TABLE apps (id TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID;
                INSERT INTO apps SELECT id, entry FROM app_rows;
                DROP TABLE app_rows;
                UPDATE meta SET value = CAST('2' AS BLOB) WHERE key = CAST('format' AS BLOB);
                """)
            #expect(try tables(db) == ["apps", "meta"] && meta(db, "format") == "2")
        }
        do {
            let s = StateStore(directory: dir)
            let back = try #require(try s.load().0)
            #expect(back.runs == saved.runs && back.terminations == saved.terminations)
            #expect(back.core.perApp == saved.core.perApp)
            #expect(s.save(saved) == nil)
            s.close()
        }
        let db = try Database(path: dir + "/state.db")
        #expect(try tables(db) == ["app_rows", "meta"])
        #expect(try meta(db, "format") == "3")
        #expect(try db.prepare("SELECT id FROM app_rows").run().count == 3)
    }

    /// An upgrade from a daemon that kept `state.json`: read once, then
    /// replaced by the store at the first save.
    @Test func aStateJSONFromAnEarlierVersionIsReadAndReplaced() throws {
        let dir = directory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        // Written the way the earlier version did: the whole state in JSON,
        // each record with its policy (which the store no longer keeps).
        let old = state(apps: 2, running: [0])
        var json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(old)) as! [String: Any]
        var core = json["core"] as! [String: Any]
        var apps = core["apps"] as! [String: Any]
        for (id, record) in apps {
            var record = record as! [String: Any]
            record["policy"] = try JSONSerialization.jsonObject(with: JSONEncoder().encode(AppPolicy()))
            apps[id] = record
        }
        core["apps"] = apps
        json["core"] = core
        try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: dir + "/state.json"))
        let s = StateStore(directory: dir)
        let back = try #require(try s.load().0)
        #expect(back.runs == old.runs && back.core.perApp == old.core.perApp)
        #expect(s.save(back) == nil)
        s.close()
        #expect(!FileManager.default.fileExists(atPath: dir + "/state.json"))
        let again = try #require(try StateStore(directory: dir).load().0)
        #expect(again.runs == old.runs && again.core.perApp == old.core.perApp)
    }

    @Test func aJSONFileThatDoesNotDecodeIsSetAside() throws {
        let dir = directory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(
            FileManager.default.createFile(
                atPath: dir + "/state.json", contents: Data("{\"format\": 1, \"bootID\"".utf8)))
        let (saved, problem) = try StateStore(directory: dir).load()
        #expect(saved == nil)
        #expect(problem?.contains("\(dir)/state.json does not decode") == true, "\(problem ?? "")")
        #expect(FileManager.default.fileExists(atPath: dir + "/state.json.unreadable"))
    }

    /// One daemon per runtime directory: a second one cannot take the state
    /// (and would otherwise kill the first one's apps as leftovers).
    @Test func aSecondStoreOnTheSameDirectoryIsRefused() throws {
        let dir = directory()
        let first = StateStore(directory: dir)
        _ = try first.load()
        #expect(first.save(state(apps: 1)) == nil)
        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        child.arguments = [dir + "/state.db", "SELECT count(*) FROM apps"]
        child.standardError = FileHandle.nullDevice
        try child.run()
        child.waitUntilExit()
        #expect(child.terminationStatus != 0, "another process cannot read the held file")
        let error = #expect(throws: DatabaseError.self) { _ = try StateStore(directory: dir).load() }
        #expect(error?.busy == true)
        first.close()
        #expect(try StateStore(directory: dir).load().0 != nil, "free once the first one is gone")
    }

    @Test func aSaveThatCannotBeWrittenSaysSoOnce() {
        let s = StateStore(directory: "/proc/lifecycled-cannot-write-here")
        let saved = state(apps: 1)
        #expect(s.save(saved)?.contains("cannot save the state to /proc/lifecycled-cannot-write-here/state.db") == true)
        #expect(s.save(saved) == nil, "the same error is said once")
    }

    /// A full disk (a real one: a tmpfs of 256 KiB): the save fails whole,
    /// the file keeps the last state that fitted, and once there is room
    /// the next save writes everything that was missed.
    @Test(.enabled(if: getuid() == 0, "mounts a tmpfs"))
    func aFullDiskLosesNothingOnceThereIsRoom() throws {
        let dir = directory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(mount("tmpfs", dir, "tmpfs", 0, "size=256k") == 0)
        defer { umount2(dir, Int32(MNT_DETACH)) }
        let s = StateStore(directory: dir)
        _ = try s.load()
        var saved = state(apps: 20)
        #expect(s.save(saved) == nil)
        // Fill the disk.
        let filler = dir + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT, 0o600)
        let block = [UInt8](repeating: 1, count: 4096)
        while write(fd, block, block.count) > 0 {}
        close(fd)
        for i in 0..<20 {
            saved.runs["app\(i)"] = SavedRun(
                generation: 1, pid: Int32(100 + i), startTime: 9,
                notifyName: String(repeating: "x", count: 2000), statusLine: nil, lastEvent: nil)
        }
        let failure = s.save(saved)
        #expect(failure?.contains("cannot save the state") == true, "\(failure ?? "")")
        #expect(s.failing)
        unlink(filler)
        #expect(s.save(saved) == nil)
        #expect(!s.failing)
        #expect(s.rowsWritten == 20, "every row the failed save missed")
        s.close()
        let back = try #require(try StateStore(directory: dir).load().0)
        #expect(back.runs.count == 20)
    }
}
