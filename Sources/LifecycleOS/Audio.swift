@preconcurrency import Glibc

/// Whether an app plays audio, as the kernel shows it: one of its
/// processes holds an ALSA playback device open (/dev/snd/pcmC*D*p). A
/// frozen audio client stalls the sound of everyone who shares the device
/// or the sound server (docs/focus.md, "Holds"). PipeWire and PulseAudio
/// clients hold no device themselves; see the doc for what is not seen.
public enum Audio {
    /// The playback device one of `group`'s processes holds open, if any.
    public static func playbackDevice(_ group: any AppGroup) -> String? {
        let pids = (group as? AppCgroup)?.pids() ?? [group.pid]
        for pid in pids {
            let dir = "/proc/\(pid)/fd"
            guard let d = opendir(dir) else { continue }
            defer { closedir(d) }
            while let entry = readdir(d) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                guard name.first?.isNumber == true, let target = try? Posix.readLink(dir + "/" + name),
                    isPlayback(target)
                else { continue }
                return target
            }
        }
        return nil
    }

    /// /dev/snd/pcmC0D0p: card, device, and `p` for playback (`c` is capture).
    static func isPlayback(_ path: String) -> Bool {
        guard path.hasPrefix("/dev/snd/pcmC"), path.hasSuffix("p") else { return false }
        let middle = path.dropFirst("/dev/snd/pcmC".count).dropLast()
        let parts = middle.split(separator: "D", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }
}
