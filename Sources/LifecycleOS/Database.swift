import CSQLite
#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
@preconcurrency import Glibc

// SQLite, as the daemon's state store uses it: one file, one writer (this
// process holds it locked while it runs), write-ahead log, and no fsync. A
// committed transaction is in the page cache, which outlives the process:
// that guards against the daemon's death, the one thing the store is for
// (a reboot ends every app anyway). A transaction that fails (a full disk)
// leaves the file as it was before it.

public struct DatabaseError: Error, CustomStringConvertible, Sendable {
    public let code: Int32
    public let message: String
    /// Another process holds the file (a second daemon on the same directory).
    public var busy: Bool { code & 0xff == SQLITE_BUSY || code & 0xff == SQLITE_LOCKED }
    public var description: String { message }
    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }
}

public final class Database {
    private var handle: OpaquePointer?
    public let path: String
    /// BEGIN and COMMIT, prepared once: parsed on every save, they were
    /// a tenth of SQLite's part of an event (docs/performance.md).
    private var begin: OpaquePointer?
    private var commit: OpaquePointer?

    /// Opens (or creates) `path` and takes it for this process alone.
    /// `synchronous`: SQLite's setting. OFF (the runtime state store) leaves
    /// committed transactions to the page cache, which outlives the process;
    /// NORMAL (durable history) also keeps the file whole through a power
    /// cut, losing at most the transactions since the log was last synced.
    public init(path: String, synchronous: String = "OFF") throws(DatabaseError) {
        self.path = path
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK else {
            let error = DatabaseError(code: rc, message: "\(path): \(Self.message(handle, rc))")
            sqlite3_close_v2(handle)
            handle = nil
            throw error
        }
        // Exclusive before the first access: the log's index lives in this
        // process's memory (no -shm file), and no other process can write.
        try execute("PRAGMA locking_mode = EXCLUSIVE")
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = \(synchronous)")
        try execute("BEGIN EXCLUSIVE; COMMIT")  // the lock, now rather than at the first write
    }

    deinit {
        sqlite3_finalize(begin)
        sqlite3_finalize(commit)
        sqlite3_close_v2(handle)
    }

    private static func message(_ handle: OpaquePointer?, _ rc: Int32) -> String {
        if let handle, let text = sqlite3_errmsg(handle) { return String(cString: text) }
        return String(cString: sqlite3_errstr(rc))
    }

    func error(_ rc: Int32, _ what: String) -> DatabaseError {
        DatabaseError(code: rc, message: "\(path): \(what): \(Self.message(handle, rc))")
    }

    public func execute(_ sql: String) throws(DatabaseError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, sql) }
    }

    public func prepare(_ sql: String) throws(DatabaseError) -> Statement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw error(rc, sql) }
        return Statement(statement, database: self)
    }

    /// Runs `sql`, a statement without rows or parameters, prepared the
    /// first time and kept in `statement`.
    private func step(_ statement: inout OpaquePointer?, _ sql: String) throws(DatabaseError) {
        if statement == nil {
            let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
            guard rc == SQLITE_OK, statement != nil else { throw error(rc, sql) }
        }
        let rc = sqlite3_step(statement)
        let failure = rc == SQLITE_DONE ? nil : error(rc, sql)
        sqlite3_reset(statement)
        if let failure { throw failure }
    }

    /// `body` in one transaction: all of it is in the file, or none.
    public func transaction(_ body: () throws(DatabaseError) -> Void) throws(DatabaseError) {
        try step(&begin, "BEGIN")
        do {
            try body()
            try step(&commit, "COMMIT")
        } catch {
            _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
            throw error
        }
    }
}

public final class Statement {
    private let statement: OpaquePointer
    private let database: Database

    init(_ statement: OpaquePointer, database: Database) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    /// Runs the statement with these parameters (text or bytes, in order)
    /// and returns every row's columns as bytes.
    @discardableResult
    public func run(_ parameters: [Data] = []) throws(DatabaseError) -> [[Data]] {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (i, p) in parameters.enumerated() {
            let rc = p.withUnsafeBytes { bytes in
                // SQLITE_TRANSIENT: SQLite copies the bytes before this returns.
                sqlite3_bind_blob(
                    statement, Int32(i + 1), bytes.baseAddress ?? UnsafeRawPointer(bitPattern: 1), Int32(bytes.count),
                    unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            }
            guard rc == SQLITE_OK else { throw database.error(rc, "bind") }
        }
        var rows: [[Data]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return rows }
            guard rc == SQLITE_ROW else { throw database.error(rc, String(cString: sqlite3_sql(statement))) }
            rows.append(
                (0..<sqlite3_column_count(statement)).map { c in
                    // The pointer first, then its length (SQLite's documented order).
                    let bytes = sqlite3_column_blob(statement, c)
                    let count = Int(sqlite3_column_bytes(statement, c))
                    guard count > 0, let bytes else { return Data() }
                    return Data(bytes: bytes, count: count)
                })
        }
    }
}
