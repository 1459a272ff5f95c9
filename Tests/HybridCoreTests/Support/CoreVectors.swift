import HybridTestSupport
import Testing

// Typed views of the transcript vector files for the unit tests: only the fields the unit tests
// read (inputs, derived values, handshake messages and keys), not the step-by-step traces, which
// the transcript tests replay. JSON names are kept as they are in the files.

/// `Vectors/transcript_qr_flow.json`.
struct TranscriptQRInputs: Decodable, Sendable {
    struct Inputs: Decodable, Sendable {
        let qr_secret, desktop_identity_private_scalar, desktop_identity_public_x962,
            desktop_identity_public_compressed, desktop_ephemeral_private_scalar, desktop_ephemeral_public_x962,
            phone_ephemeral_private_scalar, phone_ephemeral_public_x962, routing_id, eid_nonce: String
        let tunnel_server_domain_id: UInt16
    }
    struct QR: Decodable, Sendable { let cbor_hex, url: String }
    struct Derived: Decodable, Sendable {
        let eid_key_64, eid_key_aes256_part, eid_key_hmac_part, tunnel_id_16, new_tunnel_url, connect_url: String
    }
    struct Advert: Decodable, Sendable {
        let eid_plaintext_16, aes256_ecb_ciphertext_16, hmac_sha256_full_over_ciphertext, advert_20, psk_32: String
    }
    struct Noise: Decodable, Sendable {
        let protocol_name_32, prologue, msg1_desktop_to_phone, msg2_phone_to_desktop, handshake_hash: String
        let k1_desktop_write_phone_read, k2_phone_write_desktop_read: String
    }
    struct Message: Decodable, Sendable {
        let label, direction, plaintext, padded_plaintext, ciphertext, aes_gcm_nonce: String
        let sequence_number: UInt32
    }
    struct PostHandshake: Decodable, Sendable {
        let getinfo_cbor: String
        let messages: [Message]
    }
    let inputs: Inputs
    let qr: QR
    let derived: Derived
    let advert: Advert
    let noise: Noise
    let post_handshake: PostHandshake

    static func load() throws -> TranscriptQRInputs {
        try #require(try Vectors.load("transcript_qr_flow", as: VectorFile<TranscriptQRInputs>.self).vectors.first)
    }
}

/// `Vectors/transcript_linked_flow.json`.
struct LinkedTranscriptInputs: Decodable, Sendable {
    struct LinkingInQRFlow: Decodable, Sendable {
        let phone_root_secret, contact_id, pairing_id_8, per_contact_id_secret, paired_secret: String
        let phone_identity_private_scalar, phone_identity_public_x962: String
        let ecdh_phone_identity_x_desktop_qr_identity, handshake_hash, pairing_signature: String
        let authenticator_name, linking_map_cbor, update_plaintext, ciphertext_seq1_with_k2: String
        let padding_length, update_plaintext_len, padded_len, ciphertext_len: Int
    }
    struct Inputs: Decodable, Sendable {
        let phone_identity_private_scalar, phone_identity_public_x962, desktop_ephemeral_private_scalar,
            phone_ephemeral_private_scalar, paired_secret, client_nonce_16, contact_id, pairing_id_8,
            tunnel_id_from_service, routing_id_from_service, eid_plaintext_16: String
    }
    struct Derived: Decodable, Sendable {
        let client_payload_cbor, X_caBLE_Client_Payload_header_value, contact_url, phone_connect_url: String
        let eid_key, advert_20, psk: String
    }
    struct Noise: Decodable, Sendable {
        let protocol_name_32, prologue, msg1_desktop_to_phone, msg2_phone_to_desktop, handshake_hash: String
        let k1_desktop_write_phone_read, k2_phone_write_desktop_read: String
    }
    struct Message: Decodable, Sendable { let label, plaintext, padded_plaintext, ciphertext: String }
    struct PostHandshake: Decodable, Sendable { let messages: [Message] }
    let linking_info_in_qr_flow: LinkingInQRFlow
    let inputs: Inputs
    let derived: Derived
    let noise: Noise
    let post_handshake: PostHandshake

    static func load() throws -> LinkedTranscriptInputs {
        try #require(try Vectors.load("transcript_linked_flow", as: VectorFile<LinkedTranscriptInputs>.self).vectors.first)
    }
}
