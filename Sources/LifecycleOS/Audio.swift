@preconcurrency import Glibc

/// Whether an app plays audio, as the kernel shows it: one of its
/// processes holds an ALSA playback device open (/dev/snd/pcmC*D*p). A
/// frozen audio client stalls the sound of everyone who shares the device
/// or the sound server (docs/focus.md, "Holds"). PipeWire and PulseAudio
/// clients hold no device themselves; see the doc for what is not seen.
public enum Audio {
    /// The playback device one of `group`'s processes holds open, if any.
    /// Asked at every freeze: each descriptor's link is read into one
    /// small buffer and its bytes compared, and only a sound device's path
    /// becomes a String (a String and a 4 KiB buffer per descriptor were
    /// most of a freeze's instructions after the save).
    public static func playbackDevice(_ group: any AppGroup) -> String? {
        let pids = (group as? AppCgroup)?.pids() ?? [group.pid]
        var link = [UInt8](repeating: 0, count: 64)  // longer: not a device's path
        for pid in pids {
            guard let d = opendir("/proc/\(pid)/fd") else { continue }
            defer { closedir(d) }
            let fd = dirfd(d)
            while let entry = readdir(d) {
                let n = withUnsafeBytes(of: entry.pointee.d_name) { name -> Int in
                    guard let first = name.first, (0x30...0x39).contains(first) else { return -1 }  // not . or ..
                    return link.withUnsafeMutableBytes { out in
                        readlinkat(
                            fd, name.baseAddress!.assumingMemoryBound(to: CChar.self), out.baseAddress!, out.count)
                    }
                }
                guard n > soundPrefix.count, n < link.count, link.starts(with: soundPrefix) else { continue }
                let target = String(decoding: link[0..<n], as: UTF8.self)
                if isPlayback(target) { return target }
            }
        }
        return nil
    }

    /// Where every PCM device's path starts; as bytes, for the first look.
    static let pcm = "/dev/snd/pcmC"
    static let soundPrefix = Array(pcm.utf8)

    /// /dev/snd/pcmC0D0p: card, device, and `p` for playback (`c` is capture).
    static func isPlayback(_ path: String) -> Bool {
        guard path.hasPrefix(pcm), path.hasSuffix("p") else { return false }
        let middle = path.dropFirst(pcm.count).dropLast()
        let parts = middle.split(separator: "D", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }
    }
}
