import CTAP2
import HybridCore

/// Decoding a decrypted transport message: the post-handshake message, the frames (CTAP request
/// and response, update, shutdown), and the linking information, its secret never shown.
extension Walk {
    mutating func postHandshake(_ message: inout Inspection.Message, plaintext: [UInt8]) {
        message.title = "post-handshake message"
        guard let value = try? CBOR.decode(plaintext) else {
            message.flag(.postHandshakeNotCBOR, "not a CBOR item (a revision-0 phone?)")
            return
        }
        // The getInfo response nested as bytes is shown decoded; linking information (a phone that
        // sends it here) keeps its secret.
        let linking = value.mapValue?[2]
        message.cbor = DecodedCBOR(value).changing(1) { $0.withNestedCBOR() }.changing(2) { decoded in
            // A map keeps its fields but the secret; anything else at key 2 might hold one whole.
            guard let linking, linking.mapValue == nil else { return decoded.changing(3) { $0.hidden() } }
            return .secret(CBOR.encode(linking).count)
        }
        if linking == nil { message.payload = Hex.encode(plaintext) }
        do {
            _ = try PostHandshakeMessage.parse(plaintext)
        } catch {
            message.flag(.postHandshakeRefused, "the desktop refuses it (Chromium's rules, Docs/PROTOCOL-TOLERANCE.md): \(error.reason)")
        }
        for line in CBORAnnotation.lines(value, schema: .postHandshake) {
            if line.hasPrefix("2 (linking)"), let linking {
                if linking.mapValue != nil {
                    message.details.append("2 (linking):")
                    message.details += Self.linkingLines(linking)
                } else {
                    message.details.append("2 (linking): \(CBOR.encode(linking).count) bytes, not a linking map (not shown)")
                }
                continue
            }
            guard line.hasPrefix("1 (getInfo)") else {
                message.details.append(line)
                continue
            }
            message.details.append("1 (getInfo): authenticatorGetInfo response")
            if let getInfo = value.mapValue?[1]?.bytesValue, let info = try? CBOR.decode(getInfo) {
                message.details += CBORAnnotation.lines(info, schema: .getInfoResponse).map { "  " + $0 }
            }
        }
    }

    mutating func frame(_ message: inout Inspection.Message, plaintext: [UInt8], isDesktop: Bool) {
        let frame: Frame
        do {
            frame = try Frame(bytes: plaintext)
        } catch {
            message.title = "unknown frame"
            message.flag(.unknownFrame, "\(error.reason) (a Chromium peer closes the tunnel)")
            return
        }
        switch frame.type {
        case .shutdown:
            message.payload = Hex.encode(frame.payload)
            message.title = "shutdown"
            if !isDesktop { message.flag(.shutdownFromPhone, "a shutdown from the phone (only desktops send one; Chromium fails)") }
            if !frame.payload.isEmpty { message.flag(.shutdownPayload, "shutdown with \(frame.payload.count) payload bytes") }
            if isDesktop { shutdownSeen = true }
        case .ctap:
            isDesktop ? ctapRequest(&message, payload: frame.payload) : ctapResponse(&message, payload: frame.payload)
        case .update:
            update(&message, payload: frame.payload, isDesktop: isDesktop)
        case .json:
            message.title = "JSON message"
            message.details.append(String(decoding: frame.payload.prefix(200), as: UTF8.self))
        }
    }

    mutating func ctapRequest(_ message: inout Inspection.Message, payload: [UInt8]) {
        guard let command = payload.first else {
            message.title = "CTAP request"
            message.flag(.requestWithoutCommand, "CTAP request without a command byte")
            return
        }
        lastCommand = command
        message.payload = Hex.encode(payload)
        message.title = "CTAP request: \(CTAP2Command(rawValue: command))"
        let schema: CBORAnnotation.Schema =
            command == CTAP2Command.makeCredential.rawValue ? .makeCredentialRequest
            : command == CTAP2Command.getAssertion.rawValue ? .getAssertionRequest : .generic
        cbor(&message, Array(payload.dropFirst()), schema: schema)
    }

    mutating func ctapResponse(_ message: inout Inspection.Message, payload: [UInt8]) {
        responses += 1
        guard let status = payload.first else {
            message.title = "CTAP response"
            message.flag(.responseWithoutStatus, "CTAP response without a status byte")
            return
        }
        message.payload = Hex.encode(payload)
        message.title = "CTAP response: \(CTAP2StatusCode(rawValue: status))"
        if status != CTAP2StatusCode.ok.rawValue, payload.count > 1 {
            // `phone --misbehave wrong-ctap-status`: a success body behind an error status.
            message.flag(
                .errorStatusWithBody,
                "an error status followed by \(payload.count - 1) bytes: an error response is its status byte alone (the desktop takes the error)")
        }
        // A request that could not be read is flagged where it is; its response is no second anomaly.
        if lastCommand == nil, !desktopUnread { message.flag(.responseWithoutRequest, "a response without a request") }
        let schema: CBORAnnotation.Schema =
            lastCommand == CTAP2Command.makeCredential.rawValue ? .makeCredentialResponse
            : lastCommand == CTAP2Command.getAssertion.rawValue ? .getAssertionResponse
            : lastCommand == CTAP2Command.getInfo.rawValue ? .getInfoResponse : .generic
        cbor(&message, Array(payload.dropFirst()), schema: schema)
    }

    func cbor(_ message: inout Inspection.Message, _ bytes: [UInt8], schema: CBORAnnotation.Schema) {
        guard !bytes.isEmpty else { return }
        do {
            let value = try CBOR.decode(bytes)
            message.details += CBORAnnotation.lines(value, schema: schema)
            message.cbor = DecodedCBOR(value)
        } catch {
            message.flag(.undecodableCBOR, "the CBOR does not decode: \(error)")
        }
    }

    mutating func update(_ message: inout Inspection.Message, payload: [UInt8], isDesktop: Bool) {
        message.title = "update message"
        if isDesktop { message.flag(.updateFromDesktop, "an update message from the desktop (phones send them)") }
        let linking: CBORValue?
        do {
            linking = try UpdateMessage.parse(payload: payload)
        } catch {
            message.flag(.updateRefused, "a Chromium desktop closes on it: \(error.reason)")
            return
        }
        if let value = try? CBOR.decode(payload) {
            message.cbor = DecodedCBOR(value).changing(1) { $0.changing(3) { $0.hidden() } }
        }
        if let value = try? CBOR.decode(payload), let padding = value.mapValue?[0]?.bytesValue {
            message.details.append("0 (padding): \(padding.count) zero bytes\(padding.contains { $0 != 0 } ? " (not all zero)" : "")")
        }
        guard let linking else {
            message.details.append("no linking information (the person did not link, or the phone does not offer it)")
            return
        }
        message.details.append("1 (linking):")
        message.details += Self.linkingLines(linking)
        if (try? LinkingInfo(cbor: linking)) == nil {
            message.flag(.invalidLinking, "the linking map is invalid (a Chromium desktop closes the tunnel)")
        }
        if recording.flow == .linked {
            message.details.append("(linking information in a linked session is ignored)")
        }
    }

    /// A linking map's lines, indented, its link secret by size only.
    static func linkingLines(_ linking: CBORValue) -> [String] {
        CBORAnnotation.lines(linking, schema: .linking).map { line in
            guard line.hasPrefix("3 (linkSecret)") else { return "  " + line }
            let count = linking.mapValue?[3]?.bytesValue?.count ?? CBOR.encode(linking.mapValue?[3] ?? .null).count
            return "  3 (linkSecret): \(count) secret bytes (not shown)"
        }
    }
}
