/// A CTAP2 response as carried in a hybrid `kCTAP` frame: `status ‖ CBOR?`
/// (CTAP 2.2 §8.1 "Responses"; PROTOCOL.md §8.2). On error Chromium phones send only the status byte.
///
/// The status is a value; a failing status is not thrown until the payload is asked for with
/// ``decodePayload(as:)``.
public struct CTAP2Response: Hashable, Sendable {
    /// The status byte.
    public var status: CTAP2StatusCode
    /// After `CTAP2_OK`, the response map if bytes follow the status; always `nil` after an error
    /// status (whatever follows it is ignored).
    public var payload: CBORValue?

    /// Creates a response.
    public init(status: CTAP2StatusCode, payload: CBORValue? = nil) {
        self.status = status
        self.payload = payload
    }

    /// A `CTAP2_OK` response carrying `structure`.
    public init(_ structure: some CTAP2CBORCodable) {
        self.init(status: .ok, payload: structure.cbor)
    }

    /// An error response: the status byte alone.
    public static func error(_ status: CTAP2StatusCode) -> CTAP2Response {
        CTAP2Response(status: status)
    }

    /// Decodes `status ‖ CBOR?`. After `CTAP2_OK` the CBOR, when present, must be one canonical
    /// item spanning the rest. After any other status the rest is ignored (``payload`` is `nil`):
    /// the status is the answer, and Chromium does not parse what follows it either
    /// (`Ctap2DeviceOperation::OnResponseReceived`), so an authenticator that appends bytes to an
    /// error is still reported by its status.
    ///
    /// - Throws: ``CTAP2Error/Code/invalidLength`` for empty input, ``CTAP2Error/Code/invalidCBOR``.
    public init(bytes: some Collection<UInt8>) throws(CTAP2Error) {
        guard let first = bytes.first else {
            throw CTAP2Error(.invalidLength, "CTAP2 response without a status byte")
        }
        status = CTAP2StatusCode(rawValue: first)
        let rest = bytes.dropFirst()
        if rest.isEmpty || status != .ok {
            payload = nil
        } else {
            do {
                payload = try CBOR.decode(rest)
            } catch {
                throw CTAP2Error(cbor: error, in: "CTAP2 response payload")
            }
        }
    }

    /// `status ‖ CBOR?`, the payload of a `kCTAP` frame.
    public func encode() -> [UInt8] {
        [status.rawValue] + (payload.map(CBOR.encode) ?? [])
    }

    /// The payload decoded as `type`.
    ///
    /// - Throws: ``CTAP2Error/Code/errorStatus`` when the status is not `CTAP2_OK`,
    ///   ``CTAP2Error/Code/missingField`` when there is no payload, and the decoding errors of `type`.
    public func decodePayload<T: CTAP2CBORCodable>(as type: T.Type) throws(CTAP2Error) -> T {
        guard status == .ok else {
            throw CTAP2Error(.errorStatus, "authenticator answered \(status)")
        }
        guard let payload else {
            throw CTAP2Error(.missingField, "CTAP2_OK response without a \(T.self) payload")
        }
        return try T(cbor: payload)
    }
}
