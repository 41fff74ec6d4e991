import Foundation
@preconcurrency import Glibc

/// A fresh directory in the temporary directory (named PREFIX-XXXXXXXX),
/// removed when the test process exits: test runs leave nothing behind in
/// /tmp. LIFECYCLED_KEEP_TEST_DIRS=1 keeps them, to look at a failure.
public func scratchDirectory(_ prefix: String) -> String {
    let dir = FileManager.default.temporaryDirectory.path + "/\(prefix)-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    ScratchDirectories.shared.add(dir)
    return dir
}

/// Whether the test's directories are kept (LIFECYCLED_KEEP_TEST_DIRS=1).
public var keepTestDirectories: Bool { ProcessInfo.processInfo.environment["LIFECYCLED_KEEP_TEST_DIRS"] == "1" }

/// The scratch directories this process made, removed at its exit.
final class ScratchDirectories: @unchecked Sendable {
    static let shared = ScratchDirectories()
    private let lock = NSLock()
    private var dirs: [String] = []

    private init() {
        atexit { ScratchDirectories.shared.removeAll() }
    }

    func add(_ dir: String) {
        lock.lock()
        dirs.append(dir)
        lock.unlock()
    }

    func removeAll() {
        guard !keepTestDirectories else { return }
        lock.lock()
        defer { lock.unlock() }
        for dir in dirs { try? FileManager.default.removeItem(atPath: dir) }
        dirs = []
    }
}
