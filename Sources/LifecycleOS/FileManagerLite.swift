@preconcurrency import Glibc
import SystemPackage

/// Directory listing without Foundation.
public enum FileManagerLite {
    public static func list(_ path: String, directoriesOnly: Bool = false) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError("opendir", path, errno: Errno(rawValue: errno)) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if directoriesOnly, entry.pointee.d_type != UInt8(DT_DIR) { continue }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }
}
