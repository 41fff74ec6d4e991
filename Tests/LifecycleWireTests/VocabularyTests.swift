import LifecycleWire
import Testing

/// The vocabulary's codes are a contract with every client ever built: each
/// event has exactly one wire code, no two share one, and none moves.
@Suite struct VocabularyTests {
    @Test func everyEventHasOneStableWireCode() {
        let codes = LifecycleEvent.allCases.map(\.wireCode)
        #expect(Set(codes).count == codes.count, "no two events share a code")
        for e in LifecycleEvent.allCases { #expect(LifecycleEvent(wireCode: e.wireCode) == e) }
        #expect(LifecycleEvent(wireCode: 0) == nil)
        #expect(codes == Array(1...19), "codes are never renumbered: add new events at the end")
    }

    @Test func terminationCodesAreStable() {
        #expect(
            TerminationCode.allCases.map(\.rawValue) == [
                "exited", "signaled", "launch-failed", "launch-watchdog", "event-watchdog", "background-watchdog",
                "background-task-expired", "stopped-by-user", "killed-by-user", "exits-on-suspend", "shutdown",
                "protocol-violation", "memory-pressure", "per-app-limit", "exit-unknown", "not-adopted",
                "freeze-failed", "kernel-oom", "systemd-oomd", "prewarm-dropped",
            ])
    }

    @Test func backgroundModesAreASetWithManifestNames() {
        #expect(BackgroundModes(name: "audio") == .audio)
        #expect(BackgroundModes(name: "fetch") == .fetch)
        #expect(BackgroundModes(name: "remote-notification") == .remoteNotification)
        #expect(BackgroundModes(name: "newsstand") == nil)
        let modes: BackgroundModes = [.voip, .audio]
        #expect(modes.names == ["audio", "voip"])
        #expect(modes.isContinuous)
        #expect(!BackgroundModes().isContinuous)
        #expect(!BackgroundModes([.fetch, .remoteNotification]).isContinuous, "woken now and then, not kept running")
    }

    @Test func bytesInBothSpellings() {
        #expect(formatBytes(512) == "512 B")
        #expect(formatBytes(3 << 20) == "3 MiB")
        #expect(formatBytes(1536 << 20) == "1.5 GiB")
        #expect(formatBytesCompact(512) == "512B")
        #expect(formatBytesCompact(3_355_443) == "3.2M")
        #expect(formatBytesCompact(15 << 30) == "15G")
    }

    /// What String(format: "%.Nf") wrote in supervisorctl, without Foundation.
    @Test func fixedPointAsPrintfWroteIt() {
        #expect(fixed(0) == "0")
        #expect(fixed(12.4) == "12")
        #expect(fixed(12.6) == "13")
        #expect(fixed(3.14159, 1) == "3.1")
        #expect(fixed(0.05, 2) == "0.05")
        #expect(fixed(7, 3) == "7.000")
        #expect(fixed(-1.25, 1) == "-1.3")
        #expect(fixed(-0.4) == "0")
        #expect(fixed(1e300) == "1e+300")
        #expect(fixed(.infinity) == "inf")
    }

    @Test func trimmedAsFoundationTrimmedWhitespaceAndNewlines() {
        #expect(" \t{\"a\": 1}\n\n".trimmed == "{\"a\": 1}")
        #expect("inner  space".trimmed == "inner  space")
        #expect(" \n\t ".trimmed == "")
        #expect("".trimmed == "")
    }
}

/// Every client rejects a message over Wire.maxMessageSize: the daemon's
/// encoder must never produce one, whatever it is asked to send.
@Suite struct EncoderBoundTests {
    @Test func aLongLaunchFailureDescriptionIsCutToFit() throws {
        let long = String(repeating: "é", count: 32_000)  // 64,000 UTF-8 bytes: with the payload, too many
        let event = EventMessage(
            sequence: 1, event: .willFinishLaunching, deadline: 5, budgetEnd: nil,
            options: [
                KeyValue(LaunchOptionKey.launchMode.rawValue, "foreground"),
                KeyValue(LaunchOptionKey.previousReason.rawValue, TerminationCode.launchFailed.rawValue),
                KeyValue(LaunchOptionKey.previousDescription.rawValue, "launch failed: " + long),
                KeyValue(LaunchOptionKey.pushPayload.rawValue, String(repeating: "x", count: 4096)),
            ])
        let bytes = DaemonMessage.event(event).encoded()
        #expect(bytes.count <= Wire.maxMessageSize)
        guard case .event(let decoded) = try DaemonMessage.decode(bytes) else { Issue.record("not an event"); return }
        #expect(decoded.options.count == 4)
        #expect(decoded.options[0] == event.options[0] && decoded.options[1] == event.options[1])
        #expect(decoded.options[3] == event.options[3], "the longest is cut, not the payload")
        #expect(
            decoded.options[2].value.hasPrefix("launch failed: éé") && decoded.options[2].value.hasSuffix("é\u{2026}"))
    }

    @Test func tooManyOptionsAreLeftOutLastFirst() throws {
        let options = (0..<600).map { KeyValue("key\($0)", "v") }
        let bytes = DaemonMessage.event(
            EventMessage(
                sequence: 2, event: .didFinishLaunching, deadline: nil,
                budgetEnd: nil, options: options)
        ).encoded()
        #expect(bytes.count <= Wire.maxMessageSize)
        guard case .event(let decoded) = try DaemonMessage.decode(bytes) else { Issue.record("not an event"); return }
        #expect(decoded.options == Array(options.prefix(decoded.options.count)))
    }

    @Test func expiringTasksFit() throws {
        let bytes = DaemonMessage.backgroundTasksExpiring(Array(1...5000)).encoded()
        #expect(bytes.count <= Wire.maxMessageSize)
        let fitting = min(5000, (Wire.maxMessageSize - 10) / 4)
        #expect(try DaemonMessage.decode(bytes) == .backgroundTasksExpiring(Array(1...UInt32(fitting))))
    }
}
