#!/usr/bin/env python3
"""An independent hybrid (caBLE v2) authenticator ("phone") in Python, written from HybridSim's docs
alone (Docs/PROTOCOL.md, Docs/CLI.md, Vectors/), without reading its sources: a second
implementation that HybridSim's desktop must interoperate with (EndToEndIndependentPhoneTests).
Its own CBOR, Noise KNpsk0 responder, Crypter and RFC 6455 client; `cryptography` for the primitives.

Usage:
  independent_phone.py selftest [--vectors DIR]   check building blocks against Vectors/ (default: the repository's)
  independent_phone.py run --qr 'FIDO:/...' --relay ws://127.0.0.1:P --proximity udp://127.0.0.1:Q
                 [--store FILE] [--rssi -45] [--deviate NAME[,NAME...]] [--attestation none|packed|x5c]
                 [--ca-cert FILE --ca-key FILE]
  independent_phone.py make-ca --cert FILE --key FILE   a fresh attestation root CA of this "vendor"

--attestation x5c: "packed" full attestation (WebAuthn L3 §8.2) with a fresh P-256 attestation key and
certificate per registration, issued by the CA of --ca-cert/--ca-key (made by make-ca: its own P-384
root, SHA-384) and meeting §8.2.1 (version 3; Subject C, O, OU "Authenticator Attestation", CN; Basic
Constraints CA false; id-fido-gen-ce-aaguid 1.3.6.1.4.1.45724.1.1.4 holding this phone's AAGUID, which
authData and getInfo name too). x5c holds the attestation certificate (and with x5c-intermediate the
intermediate CA after it), never the root.

Deviations (--deviate a,b,...), grep '"NAME" in dev' for what each does:
  tolerated: close-after-response drop-after-response phone-shutdown getinfo-extra post-handshake-extra
    no-update no-features uuid-fde2 lowercase-tunnel-id domain-hashed odd-padding nonzero-padding
    omit-credential (with exactly one allowed) response-extra; --attestation packed; x5c-intermediate (x5c)
  wrong: wrong-eid-key bad-tag reserved-byte domain-5 short-datagram uuid-unknown stale-routing-id
    wrong-psk wrong-handshake-key bad-msg2-tag msg2-long msg2-bad-point garbage-post-handshake
    getinfo-garbage getinfo-no-aaguid getinfo-u2f-only features-dc-only features-not-array
    bad-signature same-signcount signcount-zero wrong-rpid-hash no-up garbage-cbor truncated-response
    error-status bad-attestation-sig omit-credential omit-user unknown-cred-id wrong-user-handle
    close-before-response shutdown-instead type5-instead unmasked text-frames; --rssi -80
    with --attestation x5c: bad-attestation-sig x5c-raw-sig x5c-cert-tampered x5c-aaguid-mismatch x5c-wrong-ou x5c-ca-leaf
Exit status: 0 the transaction ended (the desktop's shutdown, or its close after the response),
3 no request in time, 6 the tunnel closed early, 7 the desktop broke the protocol, 1 anything else.
"""
import base64, hashlib, hmac, json, os, socket, struct, sys, threading, time, argparse

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography import x509
from cryptography.x509.oid import NameOID, ObjectIdentifier
import datetime

VECTORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Vectors")

# ----------------------------------------------------------------------------- CBOR
class CBORError(Exception):
    pass

class Undefined:
    pass

def _head(major, n):
    if n < 24:
        return bytes([(major << 5) | n])
    if n < 0x100:
        return bytes([(major << 5) | 24, n])
    if n < 0x10000:
        return bytes([(major << 5) | 25]) + struct.pack(">H", n)
    if n < 0x100000000:
        return bytes([(major << 5) | 26]) + struct.pack(">I", n)
    return bytes([(major << 5) | 27]) + struct.pack(">Q", n)

def cbor_encode(v):
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if v is None:
        return b"\xf6"
    if isinstance(v, int):
        return _head(0, v) if v >= 0 else _head(1, -1 - v)
    if isinstance(v, (bytes, bytearray)):
        return _head(2, len(v)) + bytes(v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return _head(3, len(b)) + b
    if isinstance(v, (list, tuple)):
        return _head(4, len(v)) + b"".join(cbor_encode(x) for x in v)
    if isinstance(v, dict):
        items = [(cbor_encode(k), cbor_encode(x)) for k, x in v.items()]
        # CTAP2 canonical: major type, then encoded length, then bytes
        items.sort(key=lambda kv: (kv[0][0] >> 5, len(kv[0]), kv[0]))
        return _head(5, len(items)) + b"".join(k + x for k, x in items)
    if isinstance(v, Undefined):
        return b"\xf7"
    if isinstance(v, RawCBOR):
        return v.b
    raise CBORError("cannot encode %r" % type(v))

class RawCBOR:
    def __init__(self, b):
        self.b = b

def cbor_decode_prefix(b, i=0, depth=0):
    if depth > 16:
        raise CBORError("too deep")
    if i >= len(b):
        raise CBORError("truncated at %d" % i)
    ib = b[i]; major = ib >> 5; ai = ib & 31; i += 1
    if ai < 24:
        n = ai
    elif ai in (24, 25, 26, 27):
        ln = 1 << (ai - 24)
        if i + ln > len(b):
            raise CBORError("truncated")
        n = int.from_bytes(b[i:i + ln], "big"); i += ln
    else:
        raise CBORError("indefinite/reserved additional info %d at %d" % (ai, i - 1))
    if major == 0:
        return n, i
    if major == 1:
        return -1 - n, i
    if major in (2, 3):
        if i + n > len(b):
            raise CBORError("truncated string")
        s = b[i:i + n]; i += n
        return (bytes(s) if major == 2 else s.decode("utf-8")), i
    if major == 4:
        out = []
        for _ in range(n):
            x, i = cbor_decode_prefix(b, i, depth + 1); out.append(x)
        return out, i
    if major == 5:
        out = {}
        for _ in range(n):
            k, i = cbor_decode_prefix(b, i, depth + 1)
            x, i = cbor_decode_prefix(b, i, depth + 1)
            if isinstance(k, list):
                k = tuple(k)
            if k in out:
                raise CBORError("duplicate key")
            out[k] = x
        return out, i
    if major == 7:
        if ai == 20: return False, i
        if ai == 21: return True, i
        if ai == 22: return None, i
        if ai == 23: return Undefined(), i
        raise CBORError("unsupported simple/float")
    raise CBORError("tags unsupported")

def cbor_decode(b):
    v, i = cbor_decode_prefix(b, 0)
    if i != len(b):
        raise CBORError("trailing bytes at %d" % i)
    return v

# ----------------------------------------------------------------------------- digits
DIGITS_FOR = {1: 3, 2: 5, 3: 8, 4: 10, 5: 13, 6: 15, 7: 17}
BYTES_FOR = {v: k for k, v in DIGITS_FOR.items()}

def digits_encode(b):
    out = []
    for j in range(0, len(b), 7):
        c = b[j:j + 7]
        out.append(str(int.from_bytes(c, "little")).zfill(DIGITS_FOR[len(c)]))
    return "".join(out)

def digits_decode(s):
    if not all(ch in "0123456789" for ch in s):
        raise ValueError("non-digit")
    out = b""
    j = 0
    while len(s) - j >= 17:
        v = int(s[j:j + 17]);
        if v >= 1 << 56: raise ValueError("out of range")
        out += v.to_bytes(7, "little"); j += 17
    rest = len(s) - j
    if rest:
        if rest not in BYTES_FOR:
            raise ValueError("bad trailing length")
        n = BYTES_FOR[rest]; v = int(s[j:])
        if v >= 1 << (8 * n): raise ValueError("out of range")
        out += v.to_bytes(n, "little")
    return out

def parse_qr(url):
    if url[:6].lower() != "fido:/" or not url[:6].isascii():
        raise ValueError("not a FIDO:/ URL")
    payload = digits_decode(url[6:])
    m = cbor_decode(payload)
    if not isinstance(m, dict): raise ValueError("QR CBOR not a map")
    # PROTOCOL.md 1.1: the map must be canonical; this encoder writes the one canonical form.
    if cbor_encode(m) != payload: raise ValueError("QR CBOR not canonical")
    pk = m.get(0); sec = m.get(1)
    if not (isinstance(pk, bytes) and len(pk) == 33): raise ValueError("key 0")
    if not (isinstance(sec, bytes) and len(sec) == 16): raise ValueError("key 1")
    if 2 in m and not (isinstance(m[2], int) and not isinstance(m[2], bool)): raise ValueError("key 2 not an integer")
    if 4 in m and not isinstance(m[4], bool): raise ValueError("key 4 not a bool")
    if 5 in m and not isinstance(m[5], str): raise ValueError("key 5 not text")
    pub = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), pk)
    return {"map": m, "pub": pub, "pub65": pub.public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint),
            "secret": sec, "hint": m.get(5, "ga"), "linking": m.get(4)}

# ----------------------------------------------------------------------------- KDF / EID
def hkdf(ikm, salt, info, n):
    return HKDF(algorithm=hashes.SHA256(), length=n, salt=salt if salt else None, info=info).derive(ikm)

def derive(secret, salt, typ, n):
    return hkdf(secret, salt, struct.pack("<I", typ), n)

def aes_block(key, block):
    e = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return e.update(block) + e.finalize()

def aes_block_dec(key, block):
    d = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    return d.update(block) + d.finalize()

def make_eid(nonce, routing, domain=0):
    return b"\x00" + nonce + routing + struct.pack("<H", domain)

def encrypt_advert(eid_key, eid):
    ct = aes_block(eid_key[:32], eid)
    return ct + hmac.new(eid_key[32:], ct, hashlib.sha256).digest()[:4]

# ----------------------------------------------------------------------------- Noise KNpsk0 (responder)
NOISE_KN = b"Noise_KNpsk0_P256_AESGCM_SHA256\x00"

def pub65(priv):
    return priv.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint)

def ecdh(priv, peer65):
    peer = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), peer65)
    return priv.exchange(ec.ECDH(), peer)

class Sym:
    def __init__(self, name, trace=None):
        self.h = name; self.ck = name; self.k = None; self.trace = trace
    def _t(self, step):
        if self.trace is not None: self.trace.append((step, self.h.hex(), self.ck.hex(), self.k.hex() if self.k else None))
    def mix_hash(self, x, step="MixHash"):
        self.h = hashlib.sha256(self.h + x).digest(); self._t(step)
    def mix_key(self, ikm, step="MixKey"):
        o = hkdf(ikm, self.ck, b"", 64); self.ck, self.k = o[:32], o[32:]; self._t(step)
    def mix_key_and_hash(self, ikm, step="MixKeyAndHash"):
        o = hkdf(ikm, self.ck, b"", 96); self.ck = o[:32]; self.h = hashlib.sha256(self.h + o[32:64]).digest(); self.k = o[64:]; self._t(step)
    def encrypt_and_hash(self, pt, step="EncryptAndHash"):
        ct = AESGCM(self.k).encrypt(b"\x00" * 12, pt, self.h); self.mix_hash(ct, step); return ct
    def decrypt_and_hash(self, ct, step="DecryptAndHash"):
        pt = AESGCM(self.k).decrypt(b"\x00" * 12, ct, self.h); self.mix_hash(ct, step); return pt
    def split(self):
        o = hkdf(b"", self.ck, b"", 64); return o[:32], o[32:]

def responder_handshake(desktop_static65, psk, msg1, eph_priv=None, trace=None, dev=()):
    """returns (msg2, k1 (read), k2 (write), handshake_hash)"""
    if len(msg1) != 81:
        raise ValueError("handshake message 1 is %d bytes, expected 81" % len(msg1))
    s = Sym(NOISE_KN, trace)
    s.mix_hash(b"\x01", "MixHash(prologue)")
    s.mix_hash(desktop_static65, "MixHash(desktop static)")
    s.mix_key_and_hash(psk, "MixKeyAndHash(psk)")
    e_d = msg1[:65]
    s.mix_hash(e_d, "MixHash(e)"); s.mix_key(e_d, "MixKey(e)")
    s.decrypt_and_hash(msg1[65:], "DecryptAndHash(msg1)")
    eph = eph_priv or ec.generate_private_key(ec.SECP256R1())
    e_p = pub65(eph)
    s.mix_hash(e_p, "MixHash(e')"); s.mix_key(e_p, "MixKey(e')")
    s.mix_key(ecdh(eph, e_d), "MixKey(ee)")
    if "wrong-handshake-key" in dev:
        # use a random key in place of the desktop's static key for `se`
        s.mix_key(ecdh(eph, pub65(ec.generate_private_key(ec.SECP256R1()))), "MixKey(se) WRONG")
    else:
        s.mix_key(ecdh(eph, desktop_static65), "MixKey(se)")
    tag = s.encrypt_and_hash(b"", "EncryptAndHash(msg2)")
    k1, k2 = s.split()
    msg2 = e_p + tag
    if "bad-msg2-tag" in dev:
        msg2 = msg2[:-1] + bytes([msg2[-1] ^ 1])
    if "msg2-bad-point" in dev:
        msg2 = b"\x04" + b"\x01" * 64 + msg2[65:]
    if "msg2-long" in dev:
        msg2 = msg2 + b"\x00"
    return msg2, k1, k2, s.h

# ----------------------------------------------------------------------------- Crypter
def pad(m):
    n = ((len(m) // 32) + 1) * 32
    return m + b"\x00" * (n - len(m) - 1) + bytes([n - len(m) - 1])

def unpad(p):
    if not p: raise ValueError("empty")
    c = p[-1]
    if c + 1 > len(p): raise ValueError("bad padding")
    out = p[:len(p) - c - 1]
    return out

def nonce(seq):
    return b"\x00" * 8 + struct.pack(">I", seq)

class Crypter:
    def __init__(self, read_key, write_key):
        self.r = AESGCM(read_key); self.w = AESGCM(write_key); self.rs = 0; self.ws = 0
    def encrypt(self, m, raw_pad=False):
        c = self.w.encrypt(nonce(self.ws), m if raw_pad else pad(m), b""); self.ws += 1; return c
    def decrypt(self, c):
        p = self.r.decrypt(nonce(self.rs), c, b""); self.rs += 1; return unpad(p)

# ----------------------------------------------------------------------------- WebSocket client
class WSClosed(Exception):
    def __init__(self, code, reason):
        super().__init__("closed %s %r" % (code, reason)); self.code = code; self.reason = reason

class WS:
    def __init__(self, host, port, path, timeout=30, dev=()):
        self.dev = dev
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        req = ("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, host, port, key))
        if "no-subprotocol" not in dev:
            req += "Sec-WebSocket-Protocol: fido.cable\r\n"
        req += "\r\n"
        self.sock.sendall(req.encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            d = self.sock.recv(4096)
            if not d: raise ConnectionError("relay closed during upgrade: %r" % buf)
            buf += d
        head, self.buf = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status_line = lines[0]
        self.headers = {}
        for ln in lines[1:]:
            k, _, v = ln.partition(":"); self.headers.setdefault(k.strip().lower(), []).append(v.strip())
        parts = lines[0].split(" ", 2)
        if len(parts) < 2 or parts[1] != "101":
            raise ConnectionError("upgrade refused: %s (%r)" % (lines[0], self.buf[:200]))
        acc = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        if self.headers.get("sec-websocket-accept") != [acc]:
            raise ConnectionError("bad Sec-WebSocket-Accept")
        if self.headers.get("sec-websocket-protocol") != ["fido.cable"]:
            raise ConnectionError("relay did not select fido.cable")
        self.lock = threading.Lock()

    def header(self, name):
        v = self.headers.get(name.lower()); return v[0] if v else None

    def send_frame(self, opcode, payload, fin=True, mask=True):
        b0 = (0x80 if fin else 0) | opcode
        n = len(payload)
        mbit = 0x80 if mask else 0
        if n < 126: hdr = bytes([b0, mbit | n])
        elif n < 65536: hdr = bytes([b0, mbit | 126]) + struct.pack(">H", n)
        else: hdr = bytes([b0, mbit | 127]) + struct.pack(">Q", n)
        if mask:
            mk = os.urandom(4)
            payload = bytes(c ^ mk[i & 3] for i, c in enumerate(payload))
            hdr += mk
        with self.lock:
            self.sock.sendall(hdr + payload)

    def send(self, data):
        self.send_frame(0x1 if "text-frames" in self.dev else 0x2, data, mask="unmasked" not in self.dev)

    def _read(self, n):
        while len(self.buf) < n:
            d = self.sock.recv(65536)
            if not d: raise WSClosed(1006, "connection dropped (no close frame)")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]; return out

    def recv(self, timeout=None):
        self.sock.settimeout(timeout)
        msg = b""
        while True:
            b0, b1 = self._read(2)
            op = b0 & 15; n = b1 & 127
            if n == 126: n = struct.unpack(">H", self._read(2))[0]
            elif n == 127: n = struct.unpack(">Q", self._read(8))[0]
            if b1 & 0x80:
                raise ValueError("server sent a masked frame")
            p = self._read(n)
            if op == 0x8:
                code = struct.unpack(">H", p[:2])[0] if len(p) >= 2 else None
                try: self.send_frame(0x8, p[:2])
                except OSError: pass
                raise WSClosed(code, p[2:].decode("utf-8", "replace"))
            if op == 0x9:
                self.send_frame(0xA, p); continue
            if op == 0xA: continue
            if op == 0x1: raise ValueError("text frame from relay")
            msg += p
            if b0 & 0x80: return msg

    def close(self, code=1000, reason=b""):
        try:
            self.send_frame(0x8, struct.pack(">H", code) + reason)
            # wait briefly for the close answer
            self.sock.settimeout(2)
            try:
                while True:
                    self.recv(2)
            except Exception:
                pass
        except OSError:
            pass
        try: self.sock.close()
        except OSError: pass

# ----------------------------------------------------------------------------- authenticator
AAGUID = b"\x00" * 16
# The model's AAGUID when it attests (x5c): a random (version 4) UUID of this "vendor".
X5C_AAGUID = bytes.fromhex("6c1f5e2a93d84b07a2c4f0e1d3b59a78")

def aaguid_for(attestation):
    return X5C_AAGUID if attestation == "x5c" else AAGUID

def getinfo_cbor(dev=(), attestation="none"):
    gi = {1: ["FIDO_2_0", "FIDO_2_1"], 3: aaguid_for(attestation), 4: {"rk": True, "uv": True}, 9: ["cable", "hybrid", "internal"]}
    if "getinfo-extra" in dev:
        gi.update({2: ["credProtect", "futureExt"], 5: 2048, 0x0E: 7, 0x20: "future member", 0x21: {"x": [1, 2]},
                   4: {"rk": True, "uv": True, "futureOption": True, "plat": False},
                   1: ["FIDO_2_0", "FIDO_2_1", "FIDO_2_3_FUTURE"], 0x0A: [{"alg": -7, "type": "public-key"}, {"type": "future-type"}]})
    if "getinfo-no-aaguid" in dev:
        del gi[3]
    if "getinfo-u2f-only" in dev:
        gi[1] = ["U2F_V2"]
    return cbor_encode(gi)

def cose_key(pub):
    n = pub.public_numbers()
    return {1: 2, 3: -7, -1: 1, -2: n.x.to_bytes(32, "big"), -3: n.y.to_bytes(32, "big")}

def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()

# ----------------------------------------------------------------------------- attestation CA (x5c)
AAGUID_OID = ObjectIdentifier("1.3.6.1.4.1.45724.1.1.4")  # id-fido-gen-ce-aaguid

def _name(cn, ou=None):
    attrs = [x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
             x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Independent Phone Vendor")]
    if ou is not None:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    return x509.Name(attrs)

def _ca_certificate(subject, key, issuer, issuer_key, days, path_length):
    now = datetime.datetime.now(datetime.timezone.utc)
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    b = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=days))
         .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
         .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                      data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                      encipher_only=False, decipher_only=False), critical=True)
         .add_extension(ski, critical=False))
    algorithm = hashes.SHA384() if isinstance(issuer_key.curve, ec.SECP384R1) else hashes.SHA256()
    return b.sign(issuer_key, algorithm)

def make_ca(cert_path, key_path):
    """A root CA of this vendor: its own P-384 key, self-signed with ECDSA-SHA384, valid 10 years."""
    key = ec.generate_private_key(ec.SECP384R1())
    name = _name("Independent Phone Attestation Root")
    cert = _ca_certificate(name, key, name, key, 3650, None)
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))

def load_ca(cert_path, key_path):
    cert = x509.load_pem_x509_certificate(open(cert_path, "rb").read())
    key = serialization.load_pem_private_key(open(key_path, "rb").read(), None)
    return cert, key

def attestation_chain(ca, aaguid, dev):
    """A fresh attestation key and x5c (DER, attestation certificate first) under `ca` (cert, key)."""
    root, root_key = ca
    issuer, issuer_key = root.subject, root_key
    chain = []
    if "x5c-intermediate" in dev:
        ikey = ec.generate_private_key(ec.SECP256R1())
        iname = _name("Independent Phone Attestation Intermediate")
        icert = _ca_certificate(iname, ikey, issuer, issuer_key, 1825, 0)
        chain.append(icert)
        issuer, issuer_key = iname, ikey
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    ou = "Sales" if "x5c-wrong-ou" in dev else "Authenticator Attestation"
    ext_aaguid = bytes(b ^ 0xFF for b in aaguid) if "x5c-aaguid-mismatch" in dev else aaguid
    b = (x509.CertificateBuilder().subject_name(_name("Independent Phone Attestation", ou)).issuer_name(issuer)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=365))
         .add_extension(x509.BasicConstraints(ca="x5c-ca-leaf" in dev, path_length=None), critical=True))
    if any(aaguid):  # §8.2.1: the extension when the AAGUID is not zero; an OCTET STRING, not critical
        b = b.add_extension(x509.UnrecognizedExtension(AAGUID_OID, b"\x04\x10" + ext_aaguid), critical=False)
    algorithm = hashes.SHA384() if isinstance(issuer_key.curve, ec.SECP384R1) else hashes.SHA256()
    leaf = b.sign(issuer_key, algorithm).public_bytes(serialization.Encoding.DER)
    if "x5c-cert-tampered" in dev:  # one bit of the issuer's signature value (the certificate's last byte)
        leaf = leaf[:-1] + bytes([leaf[-1] ^ 0x01])
    return key, [leaf] + [c.public_bytes(serialization.Encoding.DER) for c in chain]

class Store:
    def __init__(self, path):
        self.path = path
        self.data = json.load(open(path)) if os.path.exists(path) else {"passkeys": []}
    def save(self):
        tmp = self.path + ".tmp"; json.dump(self.data, open(tmp, "w"), indent=1); os.replace(tmp, self.path)

def make_credential(req, store, attestation, dev, log, ca=None):
    cdh = req[1]; rp = req[2]; user = req[3]; params = req[4]
    if not any(p.get("alg") == -7 and p.get("type") == "public-key" for p in params):
        return b"\x26"  # CTAP2_ERR_UNSUPPORTED_ALGORITHM
    priv = ec.generate_private_key(ec.SECP256R1())
    cred_id = os.urandom(16)
    rp_id = rp["id"]
    flags = 0x45  # UP|UV|AT
    ad = (hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", 0) + aaguid_for(attestation) +
          struct.pack(">H", len(cred_id)) + cred_id + cbor_encode(cose_key(priv.public_key())))
    store.data["passkeys"] = [p for p in store.data["passkeys"] if not (p["rpId"] == rp_id and p["userId"] == user["id"].hex())]
    store.data["passkeys"].append({"rpId": rp_id, "credId": cred_id.hex(), "userId": user["id"].hex(),
        "userName": user.get("name"), "displayName": user.get("displayName"), "signCount": 0,
        "key": priv.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()})
    store.save()
    log("created passkey %s for %s @ %s" % (b64u(cred_id), user.get("name"), rp_id))
    if attestation == "packed":
        sig = priv.sign(ad + cdh, ec.ECDSA(hashes.SHA256()))
        if "bad-attestation-sig" in dev:
            sig = priv.sign(ad + cdh + b"x", ec.ECDSA(hashes.SHA256()))
        resp = {1: "packed", 2: ad, 3: {"alg": -7, "sig": sig}}
    elif attestation == "x5c":
        akey, x5c = attestation_chain(ca, aaguid_for(attestation), dev)
        signed = ad + cdh + (b"x" if "bad-attestation-sig" in dev else b"")
        sig = akey.sign(signed, ec.ECDSA(hashes.SHA256()))
        if "x5c-raw-sig" in dev:  # r || s, 32 bytes each (COSE's form), where WebAuthn wants DER
            r, s_ = decode_dss_signature(sig); sig = r.to_bytes(32, "big") + s_.to_bytes(32, "big")
        resp = {1: "packed", 2: ad, 3: {"alg": -7, "sig": sig, "x5c": x5c}}
        log("packed full attestation: x5c of %d certificate(s), AAGUID %s" % (len(x5c), aaguid_for(attestation).hex()))
    else:
        resp = {1: "none", 2: ad, 3: {}}
    return b"\x00" + cbor_encode(resp)

def get_assertion(req, store, dev, log):
    rp_id = req[1]; cdh = req[2]; allow = req.get(3)
    cands = [p for p in store.data["passkeys"] if p["rpId"] == rp_id]
    if allow:
        ids = {d["id"].hex() for d in allow}
        cands = [p for p in cands if p["credId"] in ids]
    if not cands:
        return b"\x2e"  # CTAP2_ERR_NO_CREDENTIALS
    p = cands[-1]
    priv = serialization.load_pem_private_key(p["key"].encode(), None)
    if "same-signcount" not in dev:
        p["signCount"] += 1
    store.save()
    count = p["signCount"]
    if "signcount-zero" in dev: count = 0
    flags = 0x05
    if "no-up" in dev: flags = 0x04
    rphash = hashlib.sha256(rp_id.encode()).digest()
    if "wrong-rpid-hash" in dev:
        rphash = hashlib.sha256(b"evil.example").digest()
    ad = rphash + bytes([flags]) + struct.pack(">I", count)
    sig = priv.sign(ad + cdh, ec.ECDSA(hashes.SHA256()))
    if "bad-signature" in dev:
        sig = priv.sign(ad + cdh[:-1] + bytes([cdh[-1] ^ 1]), ec.ECDSA(hashes.SHA256()))
    cred = bytes.fromhex(p["credId"])
    user = {"id": bytes.fromhex(p["userId"])}
    if p.get("userName") is not None: user["name"] = p["userName"]
    if p.get("displayName") is not None: user["displayName"] = p["displayName"]
    resp = {1: {"id": cred, "type": "public-key"}, 2: ad, 3: sig, 4: user}
    if "omit-credential" in dev: del resp[1]
    if "unknown-cred-id" in dev: resp[1]["id"] = os.urandom(16)
    if "wrong-user-handle" in dev: resp[4]["id"] = os.urandom(16)
    if "omit-user" in dev: del resp[4]
    if "response-extra" in dev: resp[5] = 1; resp[6] = True; resp[0x20] = "future"; resp[1]["transports"] = ["hybrid", "internal"]
    log("signed in %s @ %s with %s, signCount %d" % (p.get("userName"), rp_id, b64u(cred), count))
    return b"\x00" + cbor_encode(resp)

# ----------------------------------------------------------------------------- the phone
def run(args):
    dev = set(filter(None, (args.deviate or "").split(",")))
    t0 = time.time()
    def log(m):
        print("[pyphone %6.3f] %s" % (time.time() - t0, m), file=sys.stderr, flush=True)
    qr = parse_qr("".join(args.qr.split()))  # a code copied from a terminal may be wrapped
    log("QR: hint=%r linking=%r keys=%s" % (qr["hint"], qr["linking"], sorted(qr["map"].keys())))
    sec = qr["secret"]
    tunnel_id = derive(sec, b"", 2, 16)
    eid_key = derive(sec, b"", 1, 64)
    rhost, rport = args.relay[len("ws://"):].rsplit(":", 1)
    phost, pport = args.proximity[len("udp://"):].rsplit(":", 1)
    tid_hex = tunnel_id.hex() if "lowercase-tunnel-id" in dev else tunnel_id.hex().upper()
    ws = WS(rhost, int(rport), "/cable/new/" + tid_hex, dev=dev)
    routing_hex = ws.header("X-caBLE-Routing-ID")
    log("tunnel created, routing ID %s" % routing_hex)
    routing = bytes.fromhex(routing_hex)
    if "stale-routing-id" in dev:
        routing = bytes([routing[0] ^ 0x55]) + routing[1:]
    nonce10 = os.urandom(10)
    domain = 0
    if "domain-5" in dev: domain = 5
    if "domain-hashed" in dev: domain = 300
    eid = make_eid(nonce10, routing, domain)
    if "reserved-byte" in dev:
        eid = b"\x01" + eid[1:]
    key_for_advert = eid_key
    if "wrong-eid-key" in dev:
        key_for_advert = derive(os.urandom(16), b"", 1, 64)
    advert = encrypt_advert(key_for_advert, eid)
    if "bad-tag" in dev:
        advert = advert[:16] + bytes([advert[16] ^ 1]) + advert[17:]
    psk_eid = eid
    if "wrong-psk" in dev:
        psk_eid = make_eid(os.urandom(10), routing, domain)
    psk = derive(sec, psk_eid, 3, 32)
    uuid = 0xFDE2 if "uuid-fde2" in dev else 0xFFF9
    if "uuid-unknown" in dev: uuid = 0x1234
    dgram = struct.pack(">Hb", uuid, args.rssi) + advert
    if "short-datagram" in dev: dgram = dgram[:-1]
    stop = threading.Event()
    def advertise():
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        while not stop.is_set():
            try: u.sendto(dgram, (phost, int(pport)))
            except OSError as e: log("udp send: %s" % e)
            stop.wait(0.1)
        u.close()
    th = threading.Thread(target=advertise, daemon=True); th.start()
    log("advertising %d-byte datagram to udp://%s:%s (rssi %d)" % (len(dgram), phost, pport, args.rssi))
    try:
        msg1 = ws.recv(timeout=args.timeout)
    finally:
        stop.set()
    log("handshake message 1: %d bytes" % len(msg1))
    msg2, k1, k2, hh = responder_handshake(qr["pub65"], psk, msg1, dev=dev)
    ws.send(msg2)
    log("handshake done (hash %s...)" % hh.hex()[:16])
    cr = Crypter(read_key=k1, write_key=k2)
    if "garbage-post-handshake" in dev:
        ws.send(cr.encrypt(b"\xa2\x01\x40\x03"))
    elif "getinfo-garbage" in dev:
        ws.send(cr.encrypt(cbor_encode({1: b"\xff\xfe\x00garbage", 3: ["ctap"]})))
    else:
        ph = {1: getinfo_cbor(dev, args.attestation), 3: ["ctap"]}
        if "no-features" in dev: del ph[3]
        if "features-dc-only" in dev: ph[3] = ["dc"]
        if "features-not-array" in dev: ph[3] = "ctap"
        if "post-handshake-extra" in dev: ph[7] = "future"; ph[3] = ["ctap", "future-feature"]
        ws.send(cr.encrypt(cbor_encode(ph)))
    if "no-update" not in dev:
        link = cbor_encode({1: {}})  # not used; we never link
        upd = b"\x02" + cbor_encode({0: b"\x00" * 492})
        assert len(upd) == 498
        ws.send(cr.encrypt(upd))
    store = Store(args.store)
    ca = load_ca(args.ca_cert, args.ca_key) if args.attestation == "x5c" else None
    answered = False
    while True:
        try:
            c = ws.recv(timeout=args.timeout if not answered else 10)
        except WSClosed as e:
            log("tunnel closed: %s %s" % (e.code, e.reason))
            return 0 if answered and e.code in (1000, 1001) else 6
        except socket.timeout:
            log("timeout waiting (answered=%s)" % answered)
            ws.close(); return 0 if answered else 3
        m = cr.decrypt(c)
        if not m:
            log("empty frame"); ws.close(1011); return 7
        t = m[0]
        if t == 0:
            log("shutdown received")
            if "phone-shutdown" in dev and not answered:
                pass
            ws.close()
            return 0 if answered else 7
        if t == 2:
            log("update message from desktop (%d bytes), ignored" % len(m)); continue
        if t != 1:
            log("unexpected type %d" % t); ws.close(1011); return 7
        cmd = m[1]; body = m[2:]
        log("CTAP command 0x%02x, %d bytes" % (cmd, len(body)))
        if "close-before-response" in dev:
            log("closing before answering"); ws.close(1000); return 0
        if "shutdown-instead" in dev:
            ws.send(cr.encrypt(b"\x00")); log("sent 00 instead of a response"); answered = True; continue
        if "type5-instead" in dev:
            ws.send(cr.encrypt(b"\x05\x00")); log("sent type-5 frame instead of a response"); answered = True; continue
        if "plaintext-instead" in dev:
            ws.send(b"\x01\x00\xa0"); log("sent unencrypted bytes instead of a response"); answered = True; continue
        if cmd == 4:
            ws.send(cr.encrypt(b"\x01\x00" + getinfo_cbor(dev, args.attestation))); continue
        try:
            req = cbor_decode(body)
        except CBORError as e:
            ws.send(cr.encrypt(b"\x01\x12")); continue
        log("request: " + repr({k: (v.hex() if isinstance(v, bytes) else v) for k, v in req.items()})[:700])
        if cmd == 1:
            resp = make_credential(req, store, args.attestation, dev, log, ca)
        elif cmd == 2:
            resp = get_assertion(req, store, dev, log)
        else:
            resp = b"\x01"
        if "garbage-cbor" in dev:
            resp = b"\x00\xff\x13\x37garbage"
        if "truncated-response" in dev:
            resp = resp[:len(resp) // 2]
        if "error-status" in dev:
            resp = b"\x2e"
        if "odd-padding" in dev:   # padded length not a multiple of 32 (count byte correct)
            m_ = b"\x01" + resp; m_ = m_ + b"\x00" * 3 + b"\x03"
            if len(m_) % 32 == 0: m_ = m_[:-1] + b"\x00\x04"
            ws.send(cr.encrypt(m_, raw_pad=True))
        elif "nonzero-padding" in dev:
            m_ = pad(b"\x01" + resp); m_ = m_[:len(resp) + 1] + b"\xaa" * (len(m_) - len(resp) - 2) + m_[-1:]
            ws.send(cr.encrypt(m_, raw_pad=True))
        else:
            ws.send(cr.encrypt(b"\x01" + resp))
        answered = True
        log("response sent (status 0x%02x, %d bytes)" % (resp[0], len(resp)))
        if "phone-shutdown" in dev:
            ws.send(cr.encrypt(b"\x00")); log("sent our own shutdown 00")
        if "close-after-response" in dev:
            log("closing without waiting for the shutdown"); ws.close(1000); return 0
        if "drop-after-response" in dev:
            log("dropping TCP after response"); ws.sock.close(); return 0

# ----------------------------------------------------------------------------- self test against Vectors/
def selftest():
    ok = 0; bad = 0
    def check(name, cond):
        nonlocal ok, bad
        if cond: ok += 1
        else: bad += 1; print("FAIL", name)
    L = lambda f: json.load(open(os.path.join(VECTORS, f)))
    # digits
    for v in L("digits.json")["vectors"]:
        if "expectError" in v:
            try: digits_decode(v["digits"]); check(v["name"], False)
            except ValueError: check(v["name"], True)
        else:
            check(v["name"] + " enc", digits_encode(bytes.fromhex(v["bytes"])) == v["digits"])
            check(v["name"] + " dec", digits_decode(v["digits"]).hex() == v["bytes"])
    # qr
    for v in L("qr.json")["vectors"]:
        try:
            q = parse_qr(v["url"])
            if "expectError" in v: check(v["name"] + " (should fail)", False); continue
            if "publicKey" in v: check(v["name"] + " pk", q["map"][0].hex() == v["publicKey"])
            if "publicKeyUncompressed" in v: check(v["name"] + " pk65", q["pub65"].hex() == v["publicKeyUncompressed"])
            if "secret" in v: check(v["name"] + " secret", q["secret"].hex() == v["secret"])
            if v.get("requestType"): check(v["name"] + " hint", (q["hint"] if q["hint"] in ("ga", "mc") else "ga") == v["requestType"])
            if "cbor" in v: check(v["name"] + " cbor reenc", cbor_encode(q["map"]).hex() == v["cbor"] or not v.get("reencodesIdentically", True))
        except Exception as e:
            check(v["name"] + " (%s)" % e, "expectError" in v)
    # kdf
    for v in L("kdf.json")["vectors"]:
        s = bytes.fromhex(v["secret"]); salt = bytes.fromhex(v["salt"])
        if v["kind"] == "derive": out = derive(s, salt, v["type"], v["length"])
        else: out = hkdf(s, salt, bytes.fromhex(v["info"]), v["length"])
        check(v["name"], out.hex() == v["output"])
    # eid
    for v in L("eid.json")["vectors"]:
        if "expectError" in v or "qrSecret" not in v: continue
        sec = bytes.fromhex(v["qrSecret"]); k = derive(sec, b"", 1, 64)
        if "eidKey" in v: check(v["name"] + " eidKey", k.hex() == v["eidKey"])
        pt = bytes.fromhex(v["eidPlaintext"])
        check(v["name"] + " advert", encrypt_advert(k, pt).hex() == v["advert"])
        check(v["name"] + " decrypt", aes_block_dec(k[:32], bytes.fromhex(v["advert"])[:16]) == pt)
        check(v["name"] + " build", make_eid(bytes.fromhex(v["nonce"]), bytes.fromhex(v["routingID"]), v["domainID"]) == pt)
        if "psk" in v: check(v["name"] + " psk", derive(sec, pt, 3, 32).hex() == v["psk"])
    # crypter
    cj = L("crypter.json")
    for v in cj["vectors"]:
        pt = bytes.fromhex(v["plaintext"])
        if "padded" in v: check(v["name"] + " pad", pad(pt).hex() == v["padded"])
        check(v["name"] + " nonce", nonce(v["sequence"]).hex() == v["nonce"])
        c = AESGCM(bytes.fromhex(v["k1"])).encrypt(nonce(v["sequence"]), pad(pt), b"")
        check(v["name"] + " ct", c.hex() == v["ciphertext"])
    for p in cj["padding"]:
        x = pad(b"\x01" * p["length"]); check("pad %d" % p["length"], len(x) == p["paddedLength"] and x[-1] == p["lastByte"])
    for u in cj["unpad"]:
        try: out = unpad(bytes.fromhex(u["input"])).hex(); check("unpad " + u["input"], out == u.get("output") and (out != "" or "output" in u))
        except ValueError: check("unpad " + u["input"], "expectError" in u)
    # transcript
    t = L("transcript_qr_flow.json")["vectors"][0]
    I = t["inputs"]
    q = parse_qr(t["qr"]["url"])
    check("transcript qr cbor", digits_decode(t["qr"]["url"][6:]).hex() == t["qr"]["cbor_hex"])
    check("transcript qr pub65", q["pub65"].hex() == I["desktop_identity_public_x962"])
    check("transcript qr reencode", cbor_encode(q["map"]).hex() == t["qr"]["cbor_hex"])
    sec = q["secret"]
    check("transcript eid key", derive(sec, b"", 1, 64).hex() == t["derived"]["eid_key_64"])
    check("transcript tunnel id", derive(sec, b"", 2, 16).hex() == t["derived"]["tunnel_id_16"])
    eid = make_eid(bytes.fromhex(I["eid_nonce"]), bytes.fromhex(I["routing_id"]), I["tunnel_server_domain_id"])
    check("transcript eid", eid.hex() == t["advert"]["eid_plaintext_16"])
    check("transcript advert", encrypt_advert(derive(sec, b"", 1, 64), eid).hex() == t["advert"]["advert_20"])
    psk = derive(sec, eid, 3, 32)
    check("transcript psk", psk.hex() == t["advert"]["psk_32"])
    eph = ec.derive_private_key(int(I["phone_ephemeral_private_scalar"], 16), ec.SECP256R1())
    trace = []
    msg2, k1, k2, hh = responder_handshake(q["pub65"], psk, bytes.fromhex(t["noise"]["msg1_desktop_to_phone"]), eph_priv=eph, trace=trace)
    check("transcript msg2", msg2.hex() == t["noise"]["msg2_phone_to_desktop"])
    check("transcript hh", hh.hex() == t["noise"]["handshake_hash"])
    check("transcript k1", k1.hex() == t["noise"]["k1_desktop_write_phone_read"])
    check("transcript k2", k2.hex() == t["noise"]["k2_phone_write_desktop_read"])
    ptrace = [x for x in t["noise"]["trace"] if x["party"] == "phone"][1:]
    check("transcript trace length", len(ptrace) == len(trace))
    for (step, h, ck, k), ref in zip(trace, ptrace):
        check("trace " + ref["step"], h == ref["h_after"] and ck == ref["ck_after"] and (k == ref.get("k_after")))
    # transport messages
    wr = Crypter(read_key=k1, write_key=k2)
    for mm in t["post_handshake"]["messages"]:
        pt = bytes.fromhex(mm["plaintext"])
        if mm["direction"] == "phone->desktop":
            key = k2
        else:
            key = k1
        check(mm["label"][:40] + " padded", pad(pt).hex() == mm["padded_plaintext"])
        c = AESGCM(key).encrypt(nonce(mm["sequence_number"]), pad(pt), b"")
        check(mm["label"][:40] + " ct", c.hex() == mm["ciphertext"])
    ph = cbor_decode(bytes.fromhex(t["post_handshake"]["messages"][0]["plaintext"]))
    check("transcript post-handshake reencode", cbor_encode(ph).hex() == t["post_handshake"]["messages"][0]["plaintext"])
    # CBOR vectors: decode/re-encode positives
    for v in L("cbor.json")["vectors"]:
        b = bytes.fromhex(v["hex"])
        if "expectError" in v: continue
        try:
            x = cbor_decode(b)
            check("cbor " + v["name"], cbor_encode(x) == b or isinstance(x, Undefined))
        except CBORError as e:
            check("cbor %s (%s)" % (v["name"], e), False)
    # CTAP2: coseKey / authData / signature / getInfo re-encode
    for v in L("ctap2.json")["vectors"]:
        if "expectError" in v: continue
        b = bytes.fromhex(v["hex"])
        if v["kind"] in ("getInfoResponse", "makeCredentialResponse", "getAssertionResponse", "coseKey", "makeCredentialRequest", "getAssertionRequest"):
            try: check("ctap2 reenc " + v["name"], cbor_encode(cbor_decode(b)) == b)
            except CBORError as e: check("ctap2 %s (%s)" % (v["name"], e), False)
        if v["kind"] == "coseKey":
            pk = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), bytes.fromhex(v["expect"]["publicKey"]))
            check("cose " + v["name"], cbor_encode(cose_key(pk)) == b)
        if v["kind"] == "es256Signature":
            e = v["expect"]
            pk = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), bytes.fromhex(e["publicKey"]))
            try: pk.verify(b, bytes.fromhex(e["authData"]) + bytes.fromhex(e["clientDataHash"]), ec.ECDSA(hashes.SHA256())); check("sig", True)
            except Exception: check("sig " + v["name"], False)
    print("selftest: %d passed, %d failed" % (ok, bad))
    return 0 if bad == 0 else 1

def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd")
    st = sp.add_parser("selftest")
    st.add_argument("--vectors", default=None)
    r = sp.add_parser("run")
    r.add_argument("--qr", required=True)
    r.add_argument("--relay", required=True)
    r.add_argument("--proximity", required=True)
    r.add_argument("--rssi", type=int, default=-45)
    r.add_argument("--store", required=True)
    r.add_argument("--attestation", default="none", choices=["none", "packed", "x5c"])
    r.add_argument("--ca-cert", default=None)
    r.add_argument("--ca-key", default=None)
    mc = sp.add_parser("make-ca")
    mc.add_argument("--cert", required=True)
    mc.add_argument("--key", required=True)
    r.add_argument("--deviate", default="")
    r.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    if a.cmd == "selftest":
        global VECTORS
        if a.vectors: VECTORS = a.vectors
        sys.exit(selftest())
    if a.cmd == "make-ca":
        make_ca(a.cert, a.key); sys.exit(0)
    if a.cmd == "run":
        if a.attestation == "x5c" and not (a.ca_cert and a.ca_key):
            ap.error("--attestation x5c needs --ca-cert and --ca-key (independent_phone.py make-ca makes them)")
        try:
            sys.exit(run(a))
        except WSClosed as e:
            print("[pyphone] tunnel closed: %s %s" % (e.code, e.reason), file=sys.stderr); sys.exit(6)
        except Exception as e:
            import traceback; traceback.print_exc(); sys.exit(1)
    ap.print_help(); sys.exit(64)

if __name__ == "__main__":
    main()
