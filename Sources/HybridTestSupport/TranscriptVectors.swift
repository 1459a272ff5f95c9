/// Typed views of the two transcript vector files, shared by every test that reads them (one decoder
/// per file). JSON names are kept as they are in the files. `Vectors/` holds more than these fields;
/// a field is added here when a test needs it.

/// One operation of a Noise trace: which party, which operation, and the symmetric state after it.
public struct TraceStep: Decodable, Sendable {
    public let party: String
    public let step: String
    public let input: String?
    public let output: String?
    public let h_after: String
    public let ck_after: String
    public let k_after: String?
}

/// `Vectors/transcript_qr_flow.json`: a complete QR-initiated transaction with fixed keys.
public struct TranscriptQRInputs: Decodable, Sendable {
    public struct Inputs: Decodable, Sendable {
        public let qr_secret, desktop_identity_private_scalar, desktop_identity_public_x962,
            desktop_identity_public_compressed, desktop_ephemeral_private_scalar, desktop_ephemeral_public_x962,
            phone_ephemeral_private_scalar, phone_ephemeral_public_x962, routing_id, eid_nonce, request_type_hint: String
        public let tunnel_server_domain_id: UInt16
        public let qr_timestamp: UInt64
    }
    public struct QR: Decodable, Sendable { public let cbor_hex, url: String }
    public struct Derived: Decodable, Sendable {
        public let eid_key_64, eid_key_aes256_part, eid_key_hmac_part, tunnel_id_16, new_tunnel_url, connect_url: String
    }
    public struct Advert: Decodable, Sendable {
        public let eid_plaintext_16, aes256_ecb_ciphertext_16, hmac_sha256_full_over_ciphertext, advert_20, psk_32: String
    }
    public struct Noise: Decodable, Sendable {
        public let protocol_name_32, prologue, msg1_desktop_to_phone, msg2_phone_to_desktop, handshake_hash: String
        public let k1_desktop_write_phone_read, k2_phone_write_desktop_read: String
        public let trace: [TraceStep]
    }
    public struct Message: Decodable, Sendable {
        public let label, direction, plaintext, padded_plaintext, ciphertext, aes_gcm_nonce: String
        public let sequence_number: UInt32
    }
    public struct Extra: Decodable, Sendable {
        public let client_data_json_utf8, client_data_hash, request_cbor, response_cbor: String
    }
    public struct PostHandshake: Decodable, Sendable {
        public let getinfo_cbor: String
        public let messages: [Message]
        public let getassertion_extra: Extra
    }
    public let inputs: Inputs
    public let qr: QR
    public let derived: Derived
    public let advert: Advert
    public let noise: Noise
    public let post_handshake: PostHandshake

    /// The file's one vector.
    public static func load() throws -> TranscriptQRInputs {
        guard let first = try Vectors.load("transcript_qr_flow", as: VectorFile<TranscriptQRInputs>.self).vectors.first else {
            throw Vectors.LoadError(description: "Vectors/transcript_qr_flow.json holds no vector")
        }
        return first
    }
}

/// `Vectors/transcript_linked_flow.json`: the linking information of a QR flow (Part A), then a
/// linked `Noise_NKpsk0` transaction (Part B), with fixed keys.
public struct LinkedTranscriptInputs: Decodable, Sendable {
    public struct LinkingInQRFlow: Decodable, Sendable {
        public let phone_root_secret, contact_id, pairing_id_8, per_contact_id_secret, paired_secret: String
        public let phone_identity_private_scalar, phone_identity_public_x962: String
        public let ecdh_phone_identity_x_desktop_qr_identity, handshake_hash, pairing_signature: String
        public let authenticator_name, linking_map_cbor, update_plaintext, ciphertext_seq1_with_k2: String
        public let padding_length, update_plaintext_len, padded_len, ciphertext_len: Int
    }
    public struct Inputs: Decodable, Sendable {
        public let phone_identity_private_scalar, phone_identity_public_x962, desktop_ephemeral_private_scalar,
            phone_ephemeral_private_scalar, paired_secret, client_nonce_16, contact_id, pairing_id_8,
            tunnel_id_from_service, routing_id_from_service, eid_plaintext_16: String
    }
    public struct Derived: Decodable, Sendable {
        public let client_payload_cbor, X_caBLE_Client_Payload_header_value, contact_url, phone_connect_url: String
        public let eid_key, advert_20, psk: String
    }
    public struct Noise: Decodable, Sendable {
        public let protocol_name_32, prologue, msg1_desktop_to_phone, msg2_phone_to_desktop, handshake_hash: String
        public let k1_desktop_write_phone_read, k2_phone_write_desktop_read: String
        public let trace: [TraceStep]
    }
    public struct Message: Decodable, Sendable { public let label, plaintext, padded_plaintext, ciphertext: String }
    public struct PostHandshake: Decodable, Sendable { public let messages: [Message] }
    public let linking_info_in_qr_flow: LinkingInQRFlow
    public let inputs: Inputs
    public let derived: Derived
    public let noise: Noise
    public let post_handshake: PostHandshake

    /// The file's one vector.
    public static func load() throws -> LinkedTranscriptInputs {
        guard let first = try Vectors.load("transcript_linked_flow", as: VectorFile<LinkedTranscriptInputs>.self).vectors.first
        else {
            throw Vectors.LoadError(description: "Vectors/transcript_linked_flow.json holds no vector")
        }
        return first
    }
}
