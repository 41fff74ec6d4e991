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
// (a power cut may lose the last writes, never the file). Writes are queued
// during a turn of the loop and committed together at its end (`flush`), so
// an app saving often costs one transaction per turn, not one per save.
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

    /// Queues the app's row when it changed (nil: the app is gone).
    func update(_ id: AppID, _ app: DurableApp?) {
        guard written[id] != app else { return }
        written[id] = app
        pendingApps[id] = .some(app)
    }

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

    /// After a step: the durable part of each app that changed, queued and
    /// written at once (one transaction for the turn).
    func keepHistory(of changed: Set<AppID>) {
        for id in changed {
            if let (h, last) = supervisor.history(id) {
                history.update(id, DurableApp(history: h, last: last))
            } else {
                history.update(id, nil)
                history.discardRestoration(id)
            }
        }
        let hadProblem = history.problem != nil
        if let text = history.flush() {
            if hadProblem { logger.notice("\(text)") } else { logger.error("\(text)") }
        }
        if history.hasPending { retryUnsavedRecords() }
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
