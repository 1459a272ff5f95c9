import Foundation

/// Access to the published known-answer vectors in the repository's top-level `Vectors/` folder.
///
/// Every file there is JSON of the shape
/// `{"description": …, "provenance": …, "vectors": [{"name": …, "source": …, …}]}`,
/// with byte strings in lower-case hex and negative cases (`"expectError": "<code>"`) beside positive ones.
public enum Vectors {
    /// Why a vector file could not be loaded.
    public struct LoadError: Error, CustomStringConvertible {
        /// What went wrong, with the file name.
        public let description: String
    }

    /// The `Vectors/` folder, found relative to this source file (`Sources/HybridTestSupport/`).
    public static var directory: URL {
        URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // HybridTestSupport
            .deletingLastPathComponent()  // Sources
            .deletingLastPathComponent()  // repository root
            .appendingPathComponent("Vectors", isDirectory: true)
    }

    /// The raw bytes of `Vectors/<name>.json`.
    public static func data(_ name: String) throws -> Data {
        let url = directory.appendingPathComponent("\(name).json")
        do {
            return try Data(contentsOf: url)
        } catch {
            throw LoadError(description: "cannot read vector file \(url.path): \(error)")
        }
    }

    /// Decodes `Vectors/<name>.json` into `T`.
    public static func load<T: Decodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data(name))
        } catch let error as LoadError {
            throw error
        } catch {
            throw LoadError(description: "cannot decode Vectors/\(name).json as \(T.self): \(error)")
        }
    }
}

/// The common envelope of a vector file, generic over the vector shape.
public struct VectorFile<Vector: Decodable>: Decodable {
    /// What the file covers.
    public let description: String
    /// Where the values come from (upstream file, or "COMPUTED" with how).
    public let provenance: String
    /// The cases, positive and negative.
    public let vectors: [Vector]
}
