#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleCore
import LifecycleOS
import Logging
import LifecycleControl

// Durable history: what must outlive a reboot and a power cut, not only the
// daemon. The runtime state store (StateStore.swift) lives in /run and ends
// with the boot; this lives in `state_directory/history.db`:
//
//   apps         one row per app: its AppHistory (uses, fetch statistics and
//                window, push budget, a held push, a user quit) and its last
//                termination, instants on the wall clock (a boot's monotonic
//                clock means nothing to the next boot)
//   restoration  one row per app that saved restoration data: at most 64 KiB
//
// SQLite, not files: a row per app replaced in one transaction is what a
// directory of files would need rename dances for, and the write-ahead log
// with synchronous=NORMAL keeps the file whole through a kill or a power cut
// (a power cut may lose the last writes, never the file). An app's row is
// queued when a step changes it and written `historyDelay` (1 s) after the
// first change, with every row changed meanwhile, in one transaction: off
// the turn that sends the app its event (an activation's use row cost that
// turn 30-40 µs) and once for a burst of launches, not once per launch.
// Within the boot nothing waits on the file, since the runtime state store
// carries each app's history too (a daemon that carries on after a crash
// writes from it every row the file lacks, `catchUpHistory`); against a power cut,
// synchronous=NORMAL already leaves the last writes to the kernel's
// write-back, so a second more changes nothing anyone can rely on.
// Restoration data, which only this file holds, is written at the end of
// the turn that brought it, as before (docs/architecture.md, "The history
// after the event").
// Bounded: one row of each kind per configured app (rows of apps gone from
// the configuration are deleted at start), each row bounded in size.
//
// Kill records stay in `jetsam.log` (Records/KillLog.swift): an append-only
// text file operators read with the tools they have, already written whole
// or not at all; nothing there is ever updated in place.

/// One app's durable row: its history and last termination, on the wall clock.
struct DurableApp: Codable, Equatable, JSONWritable {
    var history: AppHistory
    var last: TerminationRecord?

    private enum CodingKeys: String, CodingKey { case history, last }

    func encode(to encoder: any Encoder) throws {  // LifecycleModel/Encoding.swift says why
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(history, forKey: .history)
        try c.encode(ifPresent: last, forKey: .last)
    }

    /// The same, by hand (LifecycleModel/JSONWriting.swift): written at
    /// every use of the app.
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("history", history)
        try w.field("last", ifPresent: last)
        w.closeObject()
    }
}

final class HistoryStore {
    let path: String
    private var database: Database?
    private var statements: (app: Statement, deleteApp: Statement, blob: Statement, deleteBlob: Statement)?
    /// What the file holds of each app (monotonic instants of this boot),
    /// so that only a change is written.
    private var written: [AppID: DurableApp] = [:]
    private var pendingApps: [AppID: DurableApp?] = [:]
    private var pendingBlobs: [AppID: [UInt8]?] = [:]
    /// Restoration data by app: handed to each launch.
    private(set) var blobs: [AppID: [UInt8]] = [:]
    /// The last write's error, said once.
    private(set) var problem: String?

    /// CLOCK_REALTIME minus CLOCK_MONOTONIC now: a monotonic instant plus
    /// this is wall-clock nanoseconds since the epoch.
    static func wallOffset() -> Duration {
        let real = Posix.realtimeNanoseconds()
        return .nanoseconds(real - Posix.monotonicNanoseconds())
    }

    init(directory: String) {
        path = directory + "/history.db"
    }

    private func open() throws(DatabaseError) -> Database {
        if let database { return database }
        try? FileManager.default.createDirectory(
            atPath: ConfigLoader.directory(of: path), withIntermediateDirectories: true)
        let db = try Database(path: path, synchronous: "NORMAL")
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS apps (id TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS restoration (id TEXT PRIMARY KEY, data BLOB NOT NULL) WITHOUT ROWID;
            """)
        statements = (
            try db.prepare("INSERT OR REPLACE INTO apps (id, entry) VALUES (?, ?)"),
            try db.prepare("DELETE FROM apps WHERE id = ?"),
            try db.prepare("INSERT OR REPLACE INTO restoration (id, data) VALUES (?, ?)"),
            try db.prepare("DELETE FROM restoration WHERE id = ?")
        )
        database = db
        return db
    }

    /// What earlier runs left, on this boot's monotonic clock, for the
    /// configured apps (rows of others are deleted). A file that cannot be
    /// opened or read is set aside and the daemon starts with no history;
    /// the problem is returned to be logged.
    func load(configured: Set<AppID>) -> (apps: [AppID: DurableApp], problem: String?) {
        do {
            let db = try open()
            let offset = Self.wallOffset()
            var apps: [AppID: DurableApp] = [:]
            let decoder = JSONDecoder()
            for row in try db.prepare("SELECT id, entry FROM apps").run() {
                let id = String(decoding: row[0], as: UTF8.self)
                guard configured.contains(id), var app = try? decoder.decode(DurableApp.self, from: row[1]) else {
                    pendingApps[id] = .some(nil)
                    continue
                }
                app.history = app.history.shifted(by: offset)
                if let last = app.last { app.last?.at = last.at - offset }
                apps[id] = app
                written[id] = app
            }
            for row in try db.prepare("SELECT id, data FROM restoration").run() {
                let id = String(decoding: row[0], as: UTF8.self)
                guard configured.contains(id), row[1].count <= 65536 else {
                    pendingBlobs[id] = .some(nil)
                    continue
                }
                blobs[id] = [UInt8](row[1])
            }
            flush()
            return (apps, nil)
        } catch {
            database = nil
            statements = nil
            let aside = path + ".unreadable"
            Posix.rename(path, to: aside)
            Posix.unlink(path + "-wal")
            return ([:], "\(path) cannot be read (\(error)): moved to \(aside); starting without history")
        }
    }

    /// Queues the app's row when it changed (nil: the app is gone); true
    /// when it did. A row that would say nothing (never used, never ended)
    /// is no row: a missing one reads as that, so a first start with 1,000
    /// apps writes nothing for the ones nobody has used.
    @discardableResult
    func update(_ id: AppID, _ app: DurableApp?) -> Bool {
        guard written[id] != app else { return false }  // most calls: unchanged
        let app = app == Self.nothing ? nil : app
        guard written[id] != app else { return false }
        written[id] = app
        pendingApps[id] = .some(app)
        return true
    }

    /// What a missing row reads as.
    static let nothing = DurableApp(history: AppHistory(), last: nil)

    /// Keeps the app's restoration data (empty: forgets it).
    func saveRestoration(_ id: AppID, _ data: [UInt8]) {
        blobs[id] = data.isEmpty ? nil : data
        pendingBlobs[id] = .some(data.isEmpty ? nil : data)
    }

    func discardRestoration(_ id: AppID) {
        guard blobs[id] != nil else { return }
        saveRestoration(id, [])
    }

    var hasPending: Bool { !pendingApps.isEmpty || !pendingBlobs.isEmpty }

    /// Restoration data waits: written at the end of the turn.
    var hasPendingRestoration: Bool { !pendingBlobs.isEmpty }

    /// Writes what waits and lets the file go (before a daemon-reexec, whose
    /// new image opens it again; what it cannot write it loses, and says so).
    @discardableResult
    func close() -> String? {
        let problem = flush()
        statements = nil
        database = nil
        return problem
    }

    /// Writes what was queued, in one transaction. On failure (a full disk)
    /// everything stays queued for the next flush; returns the error text
    /// the first time it is seen.
    @discardableResult
    func flush() -> String? {
        guard hasPending else { return nil }
        do {
            _ = try open()
            guard let database, let statements else { return nil }
            let offset = Self.wallOffset()
            let encoder = JSONStreamEncoder()  // as StateStore: its own writer, one pass
            try database.transaction { () throws(DatabaseError) in
                for (id, app) in pendingApps {
                    if var app {
                        app.history = app.history.shifted(by: .zero - offset)
                        if let last = app.last { app.last?.at = last.at + offset }
                        guard let data = try? encoder.writeBytes(app) else { continue }
                        try statements.app.run([Data(id.utf8), Data(data)])
                    } else {
                        try statements.deleteApp.run([Data(id.utf8)])
                    }
                }
                for (id, blob) in pendingBlobs {
                    if let blob {
                        try statements.blob.run([Data(id.utf8), Data(blob)])
                    } else {
                        try statements.deleteBlob.run([Data(id.utf8)])
                    }
                }
            }
            pendingApps = [:]
            pendingBlobs = [:]
            let had = problem
            problem = nil
            return had.map { _ in "history written to \(path) after all" }
        } catch {
            let text = "cannot write the history to \(path): \(error); kept in memory and retried"
            defer { problem = text }
            return text == problem ? nil : text
        }
    }
}

extension Daemon {
    /// At start: the history of every configured app. A fresh boot's core
    /// (no runtime state) takes the wake-up history from it; a restarted
    /// daemon's core carries its own, newer one. Restoration data is always
    /// the file's.
    func restoreHistory() {
        let (apps, problem) = history.load(configured: Set(manifests.keys))
        if let problem { logger.error("\(problem)") }
        guard !restored else { return }
        supervisor.restoreHistory(apps.mapValues { ($0.history, $0.last) })
        markUnsaved()
    }

    /// A daemon that carried on from the runtime state without a handoff
    /// (after a crash, or a stop that left the apps running): the earlier
    /// one may have died with rows queued, which the restored core still
    /// holds. Every row that differs from the file is written again at the
    /// history's next write. (The instants are stored on the wall clock,
    /// whose offset each daemon reads anew, so most rows with an instant
    /// differ by a little and are written again, once.)
    func catchUpHistory() {
        var rows = 0
        for id in manifests.keys {
            guard let (h, last) = supervisor.history(id) else { continue }
            if history.update(id, DurableApp(history: h, last: last)) { rows += 1 }
        }
        guard rows > 0 else { return }
        historyCatchUp = rows
        historyQueued()
    }

    /// After a step: the durable part of each app that changed, queued and
    /// written `historyDelay` later, or at the end of this turn when
    /// restoration data waits.
    func keepHistory(of changed: Set<AppID>) {
        let waiting = history.hasPending
        for id in changed {
            if let (h, last) = supervisor.history(id) {
                history.update(id, DurableApp(history: h, last: last))
            } else {
                history.update(id, nil)
                history.discardRestoration(id)
            }
        }
        if history.hasPendingRestoration {
            flushHistory()
        } else if !waiting, history.hasPending {
            historyQueued()  // the first change since the last write
        }
    }

    /// How long a changed row waits for others to be written with it.
    static let historyDelay: Int64 = 1_000_000_000

    /// Rows wait that nothing else waited before: written `historyDelay`
    /// from now (rows left by a write the disk refused wait for its retry).
    func historyQueued() {
        historyTimer?.arm(at: loop.now + Self.historyDelay)
    }

    /// Writes every queued row (the timer, or restoration data at the end
    /// of a turn); a write the disk refuses is retried with the kill
    /// records.
    func flushHistory() {
        historyTimer?.arm(at: nil)
        let hadProblem = history.problem != nil
        if let text = history.flush() {
            if hadProblem { logger.notice("\(text)") } else { logger.error("\(text)") }
        }
        if history.hasPending {
            retryUnsavedRecords()
        } else if historyCatchUp > 0 {
            logger.info("the history of \(historyCatchUp) app(s) written again from the state the last daemon left")
            historyCatchUp = 0
        }
    }

    /// An app saved restoration data (at most Wire.maxRestorationSize, the
    /// decoder saw to it): kept, and written at the end of the turn.
    func saveRestoration(_ id: AppID, _ data: [UInt8]) {
        history.saveRestoration(id, data)
        record(
            id, .restoration,
            detail: data.isEmpty
                ? "restoration data forgotten" : "restoration data saved (\(formatBytes(UInt64(data.count))))")
        markUnsaved()
    }
}
