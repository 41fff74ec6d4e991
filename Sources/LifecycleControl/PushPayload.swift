#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A remote notification's payload as the control protocol takes it: a JSON
/// object of at most Wire.maxPushPayload (4 KiB) of UTF-8, like APNs. Checked
/// by supervisorctl before it sends, and by the daemon when it receives.
public enum PushPayload {
    public static let maxBytes = 4096

    /// The payload, or why it is refused (naming what is wrong).
    public static func check(_ text: String) -> Result<String, PayloadError> {
        let bytes = text.utf8.count
        guard bytes <= maxBytes else {
            return .failure(PayloadError(description: "payload is \(bytes) bytes; at most \(maxBytes) (as APNs)"))
        }
        // JSONDecoder reads the whole text before it hands out a container:
        // a syntax error anywhere is found; then the top level must be an object.
        do { _ = try JSONDecoder().decode(TopLevel.self, from: Data(text.utf8)) } catch let e as DecodingError {
            switch e {
            case .typeMismatch: return .failure(PayloadError(description: "payload must be a JSON object ({...})"))
            case .dataCorrupted:
                // JSONDecoder says only that it is not JSON; the status
                // reader's scanner says where it first goes wrong.
                var r = JSONReader(Array(text.utf8))
                do {
                    _ = try r.skip()
                    r.ws()
                } catch {}
                let at = r.i < bytes ? "at byte \(r.i + 1) of \(bytes)" : "at its end"
                return .failure(PayloadError(description: "payload is not JSON: it goes wrong \(at)"))
            default: return .failure(PayloadError(description: "payload is not JSON: \(e)"))
            }
        } catch {
            return .failure(PayloadError(description: "payload is not JSON: \(error)"))
        }
        return .success(text)
    }

    /// Any JSON object, its members unread.
    struct TopLevel: Decodable {
        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init?(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        init(from decoder: any Decoder) throws { _ = try decoder.container(keyedBy: Key.self) }
    }
}

public struct PayloadError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
