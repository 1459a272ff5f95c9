import CTAP2
import HybridTestSupport
import Testing

/// `command ‖ CBOR` requests, `status ‖ CBOR?` responses, status codes and error mapping.
@Suite("CTAP2 request and response framing")
struct FramingTests {
    @Test("requests without parameters and unknown commands")
    func requests() throws {
        #expect(try CTAP2Request(bytes: [0x04]) == .getInfo)
        #expect(try CTAP2Request(bytes: [0x0B]) == .selection)
        #expect(CTAP2Request.getInfo.encode() == [0x04])
        let other = try CTAP2Request(bytes: [0x06, 0xA0])
        #expect(other == .other(command: .clientPIN, parameters: [0xA0]))
        #expect(other.command.description == "authenticatorClientPIN")
        #expect(other.encode() == [0x06, 0xA0])
        #expect(try CTAP2Request(bytes: [0x55]).command.description == "command 0x55")
        #expect(throws: CTAP2Error(.invalidLength)) { try CTAP2Request(bytes: [0x0B, 0x00]) }
        #expect(throws: CTAP2Error(.missingField)) { try CTAP2Request(bytes: [0x02]) }
    }

    @Test("responses: status alone, status and payload, payload on error status")
    func responses() throws {
        let error = try CTAP2Response(bytes: [0x27])
        #expect(error.status == .operationDenied && error.payload == nil)
        #expect(throws: CTAP2Error(.errorStatus)) { try error.decodePayload(as: GetAssertionResponse.self) }
        #expect(CTAP2Response.error(.noCredentials).encode() == [0x2E])
        let empty = try CTAP2Response(bytes: [0x00])
        #expect(throws: CTAP2Error(.missingField)) { try empty.decodePayload(as: AuthenticatorGetInfoResponse.self) }
        let info = AuthenticatorGetInfoResponse(versions: ["FIDO_2_0"], aaguid: Array(repeating: 0, count: 16))
        let wire = CTAP2Response(info).encode()
        #expect(wire.first == 0x00)
        #expect(try CTAP2Response(bytes: wire).decodePayload(as: AuthenticatorGetInfoResponse.self) == info)
        #expect(throws: CTAP2Error(.wrongType)) { try CTAP2Response(bytes: [0x00, 0x80]).decodePayload(as: GetAssertionResponse.self) }
    }

    @Test("status codes have spec names")
    func statusNames() {
        #expect(CTAP2StatusCode.ok.description == "CTAP2_OK (0x00)")
        #expect(CTAP2StatusCode.noCredentials.description == "CTAP2_ERR_NO_CREDENTIALS (0x2E)")
        #expect(CTAP2StatusCode.keepaliveCancel.rawValue == 0x2D)
        #expect(CTAP2StatusCode.other.name == "CTAP1_ERR_OTHER")
        #expect(CTAP2StatusCode(rawValue: 0xE3).name == "CTAP2_ERR_EXTENSION_3")
        #expect(CTAP2StatusCode(rawValue: 0xF1).name == "CTAP2_ERR_VENDOR_1")
        #expect(CTAP2StatusCode(rawValue: 0x50).name == "UNASSIGNED")
        #expect(CTAP2StatusCode.ok.isSuccess && !CTAP2StatusCode.notAllowed.isSuccess)
        let named: [(CTAP2StatusCode, UInt8)] = [
            (.invalidCommand, 0x01), (.invalidParameter, 0x02), (.invalidLength, 0x03), (.cborUnexpectedType, 0x11),
            (.invalidCBOR, 0x12), (.missingParameter, 0x14), (.credentialExcluded, 0x19), (.unsupportedAlgorithm, 0x26),
            (.operationDenied, 0x27), (.noCredentials, 0x2E), (.userActionTimeout, 0x2F), (.notAllowed, 0x30),
            (.other, 0x7F),
        ]
        for (code, byte) in named { #expect(code.rawValue == byte) }
    }

    @Test("decoding errors map to the status an authenticator should answer with")
    func errorStatus() throws {
        func status(_ bytes: [UInt8]) -> CTAP2StatusCode? {
            do {
                _ = try CTAP2Request(bytes: bytes)
                return nil
            } catch {
                return error.statusCode
            }
        }
        #expect(status([]) == .invalidCommand)
        #expect(status([0x02, 0xBF]) == .invalidCBOR)
        #expect(status([0x02, 0xA1, 0x01, 0x61, 0x61]) == .missingParameter)
        #expect(status([0x02, 0xA2, 0x01, 0x41, 0x61, 0x02, 0x40]) == .cborUnexpectedType)
        #expect(status([0x02, 0xA2, 0x01, 0x61, 0x61, 0x02, 0x40]) == .invalidLength)
    }

    @Test("errors compare by code and describe themselves")
    func errorType() {
        let error = CTAP2Error(.missingField, "authenticatorGetAssertion: missing 0x01 (rpId)")
        #expect(error == CTAP2Error(.missingField) && error != CTAP2Error(.wrongType))
        #expect(error.description == "CTAP2 missingField: authenticatorGetAssertion: missing 0x01 (rpId)")
        #expect(Set(CTAP2Error.Code.allCases.map(\.rawValue)).count == CTAP2Error.Code.allCases.count)
    }
}
