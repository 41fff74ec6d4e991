import Foundation

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
        let object: Any
        do { object = try JSONSerialization.jsonObject(with: Data(text.utf8)) } catch {
            return .failure(PayloadError(description: "payload is not JSON: \(Self.reason(error))"))
        }
        guard object is [String: Any] else {
            return .failure(PayloadError(description: "payload must be a JSON object ({...})"))
        }
        return .success(text)
    }

    static func reason(_ error: any Error) -> String {
        (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
    }
}

public struct PayloadError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
