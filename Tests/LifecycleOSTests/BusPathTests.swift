import CSystemd
@preconcurrency import Glibc
import LifecycleOS
import Testing

/// An object's path on the bus is what sd-bus's own encoding makes of its
/// names (docs/dbus.md, "Objects"): the bus half builds plain names' paths
/// itself, every save, and must not drift from it.
@Suite struct BusPathTests {
    static func encoded(_ prefix: String, _ name: String) -> String {
        var out: UnsafeMutablePointer<CChar>? = nil
        #expect(sd_bus_path_encode(prefix, name, &out) >= 0)
        defer { free(out) }
        return out.map { String(cString: $0) } ?? ""
    }

    static let names = [
        "a", "recorder", "Recorder2", "x9y", "c-recorder", "a_b", "9lives", "_", "", "über", "a.b", "A", "z0",
        "main", "Z",
    ]

    @Test(arguments: names) func anAppsAndADisplaysPathAreSdBusEncoding(name: String) {
        #expect(BusFront.path(.app, name) == Self.encoded("/io/lifecycled/Lifecycle1/app", name))
        #expect(BusFront.path(.display, name) == Self.encoded("/io/lifecycled/Lifecycle1/display", name))
    }

    @Test(arguments: names) func aScenesPathIsSdBusEncodingUnderItsApp(name: String) {
        for app in ["a", "c-recorder", "9"] {
            let scenes = Self.encoded("/io/lifecycled/Lifecycle1/app", app) + "/scene"
            #expect(BusFront.path(.scene, app + "/" + name) == Self.encoded(scenes, name), "\(app)/\(name)")
        }
    }
}
