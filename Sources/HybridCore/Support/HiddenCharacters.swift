extension Unicode.Scalar {
    /// Whether this is a character that can break or disguise a line of text a peer chose: a
    /// control character (C0, DEL, C1), a line or paragraph separator, or a bidirectional mark,
    /// embedding, override or isolate. Every place that shows peer text (`PeerText` in messages,
    /// `inspect`'s diagrams) escapes exactly these.
    package var isHiddenInPeerText: Bool {
        switch value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069, 0x061C: return true  // bidi marks, embeddings, overrides, isolates
        default: return false
        }
    }
}
