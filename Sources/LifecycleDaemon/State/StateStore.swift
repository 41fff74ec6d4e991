#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc
import LifecycleControl
import LifecycleCore
import LifecycleOS
import LifecycleWire
import SystemPackage

// The state store: everything a daemon must hand to the next one so that a
// crash, a watchdog abort or an upgrade loses nothing an app or an operator
// can observe. The core's whole state, and what the shell knows of each
// running process (who it is, where it lives, the last event it was sent),
// in one SQLite file of the runtime directory: a row per app and one for
// the rest, written in one transaction after every step that changed
// something, with only the rows that changed. A burst of 1,000 launches
// costs 1,000 small writes, not 1,000 writes of everything (which took 92 s
// when the state was one JSON file rewritten whole). The page cache outlives
// the process, so no fsync: this guards against the daemon's death, and a
// reboot ends every app anyway (the boot id says when a file is from an
// earlier boot). A daemon of an earlier version left `state.json`: it is
// read once and replaced.

/// What the shell knows of one running process, saved beside the core.
struct SavedRun: Codable, Equatable {
    var generation: UInt64
    var pid: Int32
    /// With the pid, names one process for the life of the system
    /// (field 22 of /proc/PID/stat): a recycled pid is not the app.
    var startTime: UInt64
    /// A plain program's NOTIFY_SOCKET (abstract name), bound again by the next daemon.
    var notifyName: String?
    var statusLine: String?
    /// The last event sent: sent again on a resumed channel while it is owed.
    var lastEvent: EventMessage?
    /// The events sent together with it, before it (launch events to a held
    /// prewarm), oldest first: each sent again while owed. Absent when none
    /// (a daemon before them reads the row as before).
    var sentBefore: [EventMessage]?
    /// The fingerprint of the manifest it was launched with (absent from
    /// daemons before reload existed): a later one is a change pending.
    var fingerprint: UInt64?

    // Written out for the optional fields' sake (LifecycleModel/Encoding.swift):
    // the decoder stays the synthesized one, over these keys.
    private enum CodingKeys: String, CodingKey {
        case generation, pid, startTime, notifyName, statusLine, lastEvent, sentBefore, fingerprint
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(generation, forKey: .generation)
        try c.encode(pid, forKey: .pid)
        try c.encode(startTime, forKey: .startTime)
        try c.encode(ifPresent: notifyName, forKey: .notifyName)
        try c.encode(ifPresent: statusLine, forKey: .statusLine)
        try c.encode(ifPresent: lastEvent, forKey: .lastEvent)
        try c.encode(ifPresent: sentBefore, forKey: .sentBefore)
        try c.encode(ifPresent: fingerprint, forKey: .fingerprint)
    }
}

// The rows' own writers (LifecycleModel/JSONWriting.swift): what the
// conformances above write, without Codable's containers. A field added to
// an `encode(to:)` goes into its writer too; JSONStreamEncoderTests holds
// the two to the same bytes.
extension SavedRun: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("generation", generation)
        try w.field("pid", pid)
        try w.field("startTime", startTime)
        try w.field("notifyName", ifPresent: notifyName)
        try w.field("statusLine", ifPresent: statusLine)
        try w.field("lastEvent", ifPresent: lastEvent)
        if let sentBefore {
            w.key("sentBefore")
            try w.array(sentBefore)
        }
        try w.field("fingerprint", ifPresent: fingerprint)
        w.closeObject()
    }
}

extension SavedApp: JSONWritable {
    func write(json w: inout JSONWriter) throws {
        w.openObject()
        try w.field("core", ifPresent: core)
        try w.field("run", ifPresent: run)
        try w.field("termination", ifPresent: termination)
        try w.field("crashes", ifPresent: crashes)
        w.closeObject()
    }
}

/// The state as the daemon uses it: read whole at start, saved by parts.
struct SavedDaemon: Codable {
    /// The format of `state.json`, written by daemons before the SQLite
    /// store; read once, for an upgrade from one of them.
    static let currentFormat = 1
    var format = SavedDaemon.currentFormat
    var bootID: String
    var core: CoreState
    var runs: [AppID: SavedRun]
    var terminations: [AppID: TerminationInfo]
    /// Written just before a daemon-reexec: the descriptors kept open across
    /// execve. Valid only in the process that wrote it (the same pid).
    var handoff: Handoff? = nil
    /// Interruptions held by D-Bus leases, by display: a lease's descriptor
    /// does not outlive its daemon, so the next one ends them.
    var leases: [String: Int] = [:]
}

/// One app's row: its part of the core, its running process, its last
/// termination. Written again only when one of them changed.
struct SavedApp: Codable, Equatable {
    var core: CoreState.App?
    var run: SavedRun?
    var termination: TerminationInfo?
    /// The store's crash count when the row was written (absent: none),
    /// so that a row kept through later crashes is read with their
    /// numbering gaps. Only in the file: nil in memory.
    var crashes: UInt32? = nil

    private enum CodingKeys: String, CodingKey { case core, run, termination, crashes }

    /// Written on every save of the app: its optional parts without the
    /// runtime's generic `encodeIfPresent` (LifecycleModel/Encoding.swift).
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(ifPresent: core, forKey: .core)
        try c.encode(ifPresent: run, forKey: .run)
        try c.encode(ifPresent: termination, forKey: .termination)
        try c.encode(ifPresent: crashes, forKey: .crashes)
    }
}

/// What a daemon hands its own next image across execve.
struct Handoff: Codable {
    var pid: Int32
    var control: Int32
    var controlPath: String?
    var resume: Int32
    /// The private control socket (absent from images before it existed).
    var privateControl: Int32?
    var runs: [AppID: HandedRun]
    /// CLOCK_MONOTONIC when the earlier image decided to exec (the new
    /// image logs how long the hand-over took).
    var decidedAt: Int64?
}

struct HandedRun: Codable {
    var channel: Int32
    var pidfd: Int32
    var notify: Int32
    /// Our child (launched by this process); false for a process taken
    /// back after a crash, whose end only its pidfd reports. Absent in a
    /// handoff from before it existed, where every handed run was a child.
    var child: Bool?
}

final class StateStore {
    /// The format of the file; another one is set aside, never misread.
    /// 3: the rows in `app_rows`, a table keyed by rowid, updated in place.
    /// 2 (read, and moved to 3): the same rows in `apps`, a WITHOUT ROWID
    /// table, whose B-tree keeps a row inline only up to about 1,000 bytes
    /// of a 4 KiB page: an app's row during a launch, or once it has been
    /// used a dozen times, spilled to an overflow page that every save
    /// freed and took again, four pages written instead of two
    /// (docs/performance.md, "The app rows fit their page").
    static let format = "3"
    static let formatBefore = "2"
    let path: String
    /// Where daemons before the SQLite store kept the state.
    let legacyPath: String
    private var database: Database?
    private var statements: (upsert: Statement, delete: Statement, clear: Statement, meta: Statement)?
    /// What the file holds, by app (a row per app the state knows): a save
    /// writes the rows that differ.
    private var written: [AppID: SavedApp] = [:]
    /// The same for the other rows (the shared part, the handoff, the leases).
    private var writtenMeta: [String: Data] = [:]
    /// The shared part's front and memory parts, as last encoded: each
    /// encoded again only when it changed (the clock changes with every
    /// step, the front with some, the memory part with memory samples).
    private var sharedFront: (part: CoreState.Shared.Front, bytes: [UInt8])?
    private var sharedMemory: (part: CoreState.Shared.Memory, bytes: [UInt8])?
    /// Every row is written at the next save (the state came from state.json,
    /// or the file was opened without reading it).
    private var rewrite = false
    private var lastError: String?
    /// Apps whose core part changed and is not yet in the file (kept
    /// across a failed save).
    private var unsaved: Set<AppID> = []
    /// The next save compares every app with the file (the first after a
    /// load: apps no longer configured lose their rows).
    private var compareAll = true
    /// Rows the last save wrote (what a step costs).
    private(set) var rowsWritten = 0
    /// How many times this boot a daemon carried on from this file after
    /// a crash (`countCrash`). Each such restore opens a gap in a running
    /// app's numbering, in memory; a row written later carries the count,
    /// so a row kept as it was is read with the gaps opened since.
    private(set) var crashes: UInt32 = 0
    /// For the rows read by `load`: the crashes since each was written.
    private(set) var crashesMissed: [AppID: UInt32] = [:]
    /// This boot's id, read once: every save carries it.
    let bootID = StateStore.bootID()

    /// The last save failed (a daemon-reexec must not go ahead on it).
    var failing: Bool { lastError != nil }

    init(directory: String) {
        path = directory + "/state.db"
        legacyPath = directory + "/state.json"
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    static func bootID() -> String {
        ((try? Posix.readFile("/proc/sys/kernel/random/boot_id")) ?? "").trimmed
    }

    /// Opens the file for this process alone (once).
    private func open() throws(DatabaseError) -> Database {
        if let database { return database }
        let db = try Database(path: path)
        try db.execute(
            """
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value BLOB) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS app_rows (id TEXT PRIMARY KEY, entry BLOB NOT NULL);
            """)
        statements = (
            try db.prepare(
                "INSERT INTO app_rows (id, entry) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET entry = excluded.entry"),
            try db.prepare("DELETE FROM app_rows WHERE id = ?"),
            try db.prepare("DELETE FROM app_rows"),
            try db.prepare("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)")
        )
        database = db
        // What the file holds is not known until `load` reads it: a save
        // before that replaces every row.
        rewrite = true
        return db
    }

    /// The state a previous daemon left, if any. A file that does not
    /// decode, or is from another format, is set aside (renamed with
    /// `.unreadable`) with the reason, and the daemon starts afresh; one
    /// from an earlier boot is emptied. Throws only when another process
    /// holds the file: a second daemon on the same runtime directory.
    func load() throws(DatabaseError) -> (SavedDaemon?, problem: String?) {
        crashes = 0
        crashesMissed = [:]
        if FileManager.default.fileExists(atPath: legacyPath) {
            // An earlier version ran last (an upgrade, or a downgrade and back):
            // its file wins, and every row is replaced at the next save.
            do { _ = try open() } catch  where !error.busy {
                _ = setAside(path, "cannot be opened (\(error))")  // replaced whole at the next save
            }
            let (saved, problem) = loadLegacy()
            rewrite = true
            return (saved, problem)
        }
        let db: Database
        do { db = try open() } catch  where !error.busy {
            return (nil, setAside(path, "cannot be opened (\(error))"))
        }
        do {
            let meta = try db.prepare("SELECT key, value FROM meta").run()
            var values: [String: Data] = [:]
            for row in meta { values[String(decoding: row[0], as: UTF8.self)] = row[1] }
            guard let format = values["format"].map({ String(decoding: $0, as: UTF8.self) }) else {
                rewrite = false  // empty
                return (nil, nil)
            }
            guard format == Self.format || format == Self.formatBefore else {
                return (nil, setAside(path, "is in format \(format), this daemon reads \(Self.format)"))
            }
            if format == Self.formatBefore, let statements {
                // The daemon before this one (an upgrade, a daemon-reexec into
                // a new binary): its rows move to the new table, as they are.
                try db.transaction { () throws(DatabaseError) in
                    try db.execute(
                        """
                        CREATE TABLE IF NOT EXISTS apps (id TEXT PRIMARY KEY, entry BLOB NOT NULL) WITHOUT ROWID;
                        INSERT OR REPLACE INTO app_rows (id, entry) SELECT id, entry FROM apps;
                        DROP TABLE apps;
                        """)
                    try statements.meta.run([Data("format".utf8), Data(Self.format.utf8)])
                }
            }
            guard values["boot"].map({ String(decoding: $0, as: UTF8.self) }) == bootID else {
                try db.execute("DELETE FROM app_rows; DELETE FROM meta")
                return (nil, "\(path) is from an earlier boot: ignored")
            }
            let rows = try db.prepare("SELECT id, entry FROM app_rows").run()
            // Decoded on every core: with 1,000 apps this is most of a restart.
            let apps = Parallel.map(rows.count) { i in
                Result { try JSONDecoder().decode(SavedApp.self, from: rows[i][1]) }
            }
            var entries: [AppID: SavedApp] = [:]
            for (row, app) in zip(rows, apps) { entries[String(decoding: row[0], as: UTF8.self)] = try app.get() }
            crashes = values["crashes"].flatMap { UInt32(String(decoding: $0, as: UTF8.self)) } ?? 0
            for (id, app) in entries {
                let written = app.crashes ?? 0
                if crashes > written { crashesMissed[id] = crashes - written }
                entries[id]?.crashes = nil
            }
            let shared = try JSONDecoder().decode(CoreState.Shared.self, from: values["shared"] ?? Data())
            let handoff = try values["handoff"].flatMap { $0.isEmpty ? nil : $0 }.map {
                try JSONDecoder().decode(Handoff.self, from: $0)
            }
            let leases = try values["leases"].flatMap { $0.isEmpty ? nil : $0 }.map {
                try JSONDecoder().decode([String: Int].self, from: $0)
            }
            written = entries
            rewrite = false
            return (
                SavedDaemon(
                    bootID: bootID, core: CoreState(shared: shared, apps: entries.compactMapValues(\.core)),
                    runs: entries.compactMapValues(\.run), terminations: entries.compactMapValues(\.termination),
                    handoff: handoff, leases: leases ?? [:]),
                nil
            )
        } catch let error as DatabaseError where error.busy {
            throw error
        } catch {
            return (nil, setAside(path, "does not decode (\(error))"))
        }
    }

    /// `state.json` of a daemon before the SQLite store.
    private func loadLegacy() -> (SavedDaemon?, problem: String?) {
        guard let data = FileManager.default.contents(atPath: legacyPath) else { return (nil, nil) }
        let saved: SavedDaemon
        do { saved = try JSONDecoder().decode(SavedDaemon.self, from: data) } catch {
            return (nil, setAside(legacyPath, "does not decode (\(error))"))
        }
        guard saved.format == SavedDaemon.currentFormat else {
            return (nil, setAside(legacyPath, "format \(saved.format), this daemon reads \(SavedDaemon.currentFormat)"))
        }
        guard saved.bootID == bootID else {
            try? FileManager.default.removeItem(atPath: legacyPath)
            return (nil, "\(legacyPath) is from an earlier boot: ignored")
        }
        return (saved, nil)
    }

    private func setAside(_ file: String, _ why: String) -> String {
        let aside = file + ".unreadable"
        if file == path {
            database = nil
            statements = nil
            written = [:]
            writtenMeta = [:]
            Posix.unlink(path + "-wal")
        }
        Posix.rename(file, to: aside)
        return "\(file) \(why): moved to \(aside); starting afresh"
    }

    /// The shared part as one object: its clock encoded afresh, its other
    /// parts from their last encoding when they have not changed.
    private func sharedBytes(_ shared: CoreState.Shared, _ encoder: JSONStreamEncoder) throws -> [UInt8] {
        let front = shared.front
        if sharedFront?.part != front { sharedFront = (front, try encoder.writeBytes(front)) }
        let memory = shared.memory
        if sharedMemory?.part != memory { sharedMemory = (memory, try encoder.encodeBytes(memory)) }
        let parts = JSONStreamEncoder.joinObjects(sharedFront!.bytes, sharedMemory!.bytes)
        return JSONStreamEncoder.joinObjects(parts, try encoder.writeBytes(shared.clock))
    }

    /// Writes what changed since the last save, in one transaction:
    /// `changed` names the apps whose core part, process or termination
    /// changed (nil: any may have); only their rows are compared with what
    /// the file holds. Returns an error text the first time a given error
    /// happens (a full disk, say), so the caller logs it once; the daemon
    /// carries on in memory, and the next save writes everything still unsaved.
    func save(_ state: SavedDaemon, changed: Set<AppID>? = nil) -> String? {
        unsaved.formUnion(changed ?? [])
        do {
            let db = try open()
            guard let statements else { return nil }
            let all = changed == nil || rewrite || compareAll
            var rows: [AppID: SavedApp?] = [:]
            func consider(_ id: AppID) {
                let app = SavedApp(core: state.core.app(id), run: state.runs[id], termination: state.terminations[id])
                let now: SavedApp? = app == SavedApp() ? nil : app
                if rewrite || written[id] != now { rows[id] = now }
            }
            if all {
                for id in Set(state.core.appIDs).union(written.keys).union(state.runs.keys) { consider(id) }
            } else {
                // `changed` names the apps whose core part, run or
                // termination changed (the daemon's tables keep count):
                // a save costs what changed, not the number of apps.
                for id in unsaved { consider(id) }
            }
            // One pass to JSON (JSONStreamEncoder): JSONEncoder's tree was
            // most of an event's instructions (docs/performance.md).
            let encoder = JSONStreamEncoder()
            var meta: [(String, Data)] = []
            try db.transaction { () throws(DatabaseError) in
                do {
                    if rewrite { try statements.clear.run() }
                    for (id, app) in rows {
                        if var app {
                            app.crashes = crashes > 0 ? crashes : nil
                            try statements.upsert.run([Data(id.utf8), Data(try encoder.writeBytes(app))])
                        } else {
                            try statements.delete.run([Data(id.utf8)])
                        }
                    }
                    if all {  // constant while the file is open
                        meta += [
                            ("format", Data(Self.format.utf8)), ("boot", Data(state.bootID.utf8)),
                            ("crashes", Data(String(crashes).utf8)),
                        ]
                    }
                    meta += [
                        ("shared", Data(try sharedBytes(state.core.shared, encoder))),
                        ("handoff", try state.handoff.map { try encoder.encode($0) } ?? Data()),
                        ("leases", state.leases.isEmpty ? Data() : try encoder.encode(state.leases)),
                    ]
                    // What the file holds already is not written again.
                    for (key, value) in meta where all || writtenMeta[key] != value {
                        try statements.meta.run([Data(key.utf8), value])
                    }
                } catch let error as DatabaseError {
                    throw error
                } catch {
                    throw DatabaseError(code: -1, message: "cannot encode: \(error)")
                }
            }
            for (key, value) in meta { writtenMeta[key] = value }
            for (id, app) in rows { written[id] = app }
            rowsWritten = rows.count
            unsaved = []
            compareAll = false
            if rewrite {
                rewrite = false
                Posix.unlink(legacyPath)
            }
            lastError = nil
            return nil
        } catch {
            let text = "cannot save the state to \(path): \(error); a crash now would lose what changed since"
            defer { lastError = text }
            return text == lastError ? nil : text
        }
    }

    /// A daemon carries on from this file after a crash: the count goes up
    /// and is written at once, before anything is sent to an app, so that
    /// the gaps this restore opens are never opened again at the same place
    /// (a second crash before the next save would reuse the numbers).
    /// Returns an error text when it cannot be written; every row is then
    /// written again, with the count, at the next save that can.
    func countCrash() -> String? {
        crashes &+= 1
        do {
            let db = try open()
            guard let statements else { return nil }
            try db.transaction { () throws(DatabaseError) in
                try statements.meta.run([Data("crashes".utf8), Data(String(crashes).utf8)])
            }
            return nil
        } catch {
            rewrite = true
            return "cannot save the state to \(path): \(error); a crash now would lose what changed since"
        }
    }

    /// The core restored from what `load` read (`afterCrash`: by a daemon
    /// that counted a crash): the rows as read are the restored parts with
    /// their gaps, so an app that changes nothing is not written again.
    func restored(afterCrash: Bool) {
        for (id, app) in written {
            guard let core = app.core else { continue }
            written[id]?.core = core.afterCrashes((crashesMissed[id] ?? 0) &+ (afterCrash ? 1 : 0))
        }
    }

    /// Lets the file go (another process may take it): before an exec, in tests.
    func close() {
        compareAll = true
        statements = nil
        database = nil
        written = [:]
        writtenMeta = [:]
    }

    /// After a clean shutdown nothing is left to re-adopt.
    func remove() {
        close()
        for file in [path, path + "-wal", path + "-shm", legacyPath] { Posix.unlink(file) }
    }
}
