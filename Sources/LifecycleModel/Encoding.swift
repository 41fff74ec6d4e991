// A cheaper `encodeIfPresent` for the encoders written by hand.
//
// The standard library's `encodeIfPresent<T>(_: T?, forKey:)` is generic
// over T and not specialised into our modules: each call, nil or not, asks
// the runtime for the metadata of `Optional<T>` (about 650 instructions
// under callgrind) and passes the optional through three generic layers
// (the container, its box, the protocol's default). A save encodes dozens
// of optional fields (docs/performance.md, "Optional fields without the
// runtime's help"). Inlined into a caller that knows T, `if let` needs no
// metadata, and a nil costs a comparison.

extension KeyedEncodingContainer {
    /// What `encodeIfPresent` writes (nothing for nil; the value under its
    /// key otherwise), without its generic cost.
    @inlinable
    public mutating func encode<T: Encodable>(ifPresent value: T?, forKey key: Key) throws {
        if let value { try encode(value, forKey: key) }
    }
}
