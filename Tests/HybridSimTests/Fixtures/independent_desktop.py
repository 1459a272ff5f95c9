#!/usr/bin/env python3
"""An independent hybrid (caBLE v2) client platform ("desktop") in Python, written from HybridSim's
docs alone (Docs/PROTOCOL.md, Docs/CLI.md, Docs/RELAY.md, Docs/PROTOCOL-TOLERANCE.md, the proximity
contract, Vectors/), without reading its sources: a second implementation that HybridSim's phone
must interoperate with, the mirror image of independent_phone.py. Its own QR generation, UDP
proximity scanner, advert decryption, /cable/connect client, Noise KNpsk0 initiator, CTAP2 requests
and relying-party checks; CBOR, Derive, the AES block, the Crypter and the RFC 6455 client are imported
from independent_phone.py. `cryptography` for the primitives; no other packages.

Usage:
  independent_desktop.py selftest [--vectors DIR]
      check the desktop-side building blocks against Vectors/ (QR, advert, KNpsk0 initiator trace)
  independent_desktop.py run --relay ws://127.0.0.1:P --proximity-port Q --store FILE
                 [--request mc|ga] [--deviate NAME[,NAME...]] [--rp-id example.com]
                 [--min-rssi -70] [--timeout 30]
      prints one line `FIDO:/...` on stdout (give it to `hybrid-sim phone --qr`), waits for the
      phone's 23-byte advert on udp://127.0.0.1:Q, joins the tunnel, sends the request, verifies
      the answer as a relying party (mc: attestation "none"; ga: signature, signCount, user handle
      against --store), ends the transaction with the shutdown message. --store is this desktop's
      relying-party store (JSON), written by mc and read and updated by ga.

Deviations (--deviate a,b,...), grep '"NAME" in dev' for what each does:
  tolerated: close-no-shutdown drop-no-shutdown silent-no-shutdown getinfo-first selection-first
    update-message qr-unknown-keys qr-no-key45 qr-hint-unknown lowercase-ids odd-padding
    nonzero-padding big-request
  wrong: wrong-handshake-key wrong-psk bad-msg1-tag bad-request-tag request-not-cbor
    unsupported-command unsupported-command-only not-cbor-then-request getinfo-only second-request huge-request shutdown-first
    shutdown-with-request garbage-after-handshake type5 close-before-request short-shutdown rev0
    text-frames unmasked
Exit status: 0 verified (the phone's answer passed the relying-party checks, or for a deviation the
phone answered as the docs say it should), 3 no matching advert / no answer in time, 4 the phone
refused (a CTAP2 error status), 5 verification failed, 6 the tunnel closed early (or the relay
refused), 7 the phone broke the protocol, 1 anything else (including usage errors in --store).
"""
import base64, hashlib, hmac, json, os, socket, struct, sys, threading, time, argparse

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

VECTORS = None  # --vectors, or $HYBRIDSIM_VECTORS, or ../../../Vectors next to this file

# ----------------------------------------------------------------------------- shared with the phone
# CBOR, digits, the QR code's parsing, Derive, the AES block, the advert, the symmetric state, the
# Crypter and the RFC 6455 client are the independent phone's (the same fixture author, written from
# the same docs): one copy, next to this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from independent_phone import (  # noqa: E402
    CBORError, Undefined, RawCBOR, cbor_encode, cbor_decode, cbor_decode_prefix, digits_encode, digits_decode,
    parse_qr, hkdf, derive, aes_block, aes_block_dec, make_eid, encrypt_advert, pub65, ecdh, Sym, pad, unpad,
    nonce, Crypter, WSClosed, WS, b64u)

# ----------------------------------------------------------------------------- Noise KNpsk0 (initiator)
NOISE_KN = b"Noise_KNpsk0_P256_AESGCM_SHA256\x00"

class Initiator:
    """The desktop's half of KNpsk0 (PROTOCOL.md §5.2): prologue 01, the static key is the QR key."""
    def __init__(self, static_priv, psk, eph_priv=None, trace=None, dev=()):
        self.static = static_priv; self.dev = dev
        self.s = Sym(NOISE_KN, trace)
        self.s.mix_hash(b"\x01", "MixHash(prologue)")
        static_pub = pub65(static_priv)
        if "wrong-handshake-key" in dev:   # the phone knows the QR's key; hash a different one
            static_pub = pub65(ec.generate_private_key(ec.SECP256R1()))
        self.s.mix_hash(static_pub, "MixHash(desktop static)")
        self.s.mix_key_and_hash(psk, "MixKeyAndHash(psk)")
        self.e = eph_priv or ec.generate_private_key(ec.SECP256R1())

    def message1(self):
        e = pub65(self.e)
        self.s.mix_hash(e, "MixHash(e)"); self.s.mix_key(e, "MixKey(e)")
        tag = self.s.encrypt_and_hash(b"", "EncryptAndHash(msg1)")
        m = e + tag
        if "bad-msg1-tag" in self.dev:
            m = m[:-1] + bytes([m[-1] ^ 1])
        return m

    def read_message2(self, m):
        """returns (k1 desktop write, k2 desktop read, handshake hash); raises ProtocolError"""
        if len(m) != 81:
            raise ProtocolError("handshake message 2 is %d bytes, not 81 (65-byte point and 16-byte tag)" % len(m))
        ep = m[:65]
        try:
            ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), ep)
        except ValueError:
            raise ProtocolError("handshake message 2 does not start with a P-256 point")
        self.s.mix_hash(ep, "MixHash(e')"); self.s.mix_key(ep, "MixKey(e')")
        self.s.mix_key(ecdh(self.e, ep), "MixKey(ee)")
        self.s.mix_key(ecdh(self.static, ep), "MixKey(se)")
        try:
            self.s.decrypt_and_hash(m[65:], "DecryptAndHash(msg2)")
        except Exception:
            raise ProtocolError("handshake message 2 does not authenticate (wrong PSK, key or transcript)")
        k1, k2 = self.s.split()
        return k1, k2, self.s.h

# ----------------------------------------------------------------------------- desktop
class Fail(Exception):
    code = 1
class ProtocolError(Fail):
    code = 7
class VerificationFailed(Fail):
    code = 5
class TunnelClosed(Fail):
    code = 6
class Refused(Fail):
    code = 4
class TimedOut(Fail):
    code = 3

STATUS_NAMES = {0x00: "CTAP2_OK", 0x01: "CTAP1_ERR_INVALID_COMMAND", 0x02: "CTAP1_ERR_INVALID_PARAMETER",
    0x03: "CTAP1_ERR_INVALID_LENGTH", 0x11: "CTAP2_ERR_CBOR_UNEXPECTED_TYPE", 0x12: "CTAP2_ERR_INVALID_CBOR",
    0x14: "CTAP2_ERR_MISSING_PARAMETER", 0x19: "CTAP2_ERR_CREDENTIAL_EXCLUDED", 0x26: "CTAP2_ERR_UNSUPPORTED_ALGORITHM",
    0x27: "CTAP2_ERR_OPERATION_DENIED", 0x2E: "CTAP2_ERR_NO_CREDENTIALS", 0x2F: "CTAP2_ERR_USER_ACTION_TIMEOUT",
    0x7F: "CTAP1_ERR_OTHER"}

def status_name(s):
    return "%s (0x%02X)" % (STATUS_NAMES.get(s, "status"), s)

def compressed(priv):
    return priv.public_key().public_bytes(serialization.Encoding.X962, serialization.PublicFormat.CompressedPoint)

def make_qr(static_priv, secret, request, dev=()):
    """The QR map (PROTOCOL.md §1.3), CTAP2-canonical CBOR, as FIDO:/digits."""
    m = {0: compressed(static_priv), 1: secret, 2: 2, 3: int(time.time()), 4: False, 5: request}
    if "qr-unknown-keys" in dev:
        m.update({6: True, 7: "future", 0x20: [1, 2, {"x": b"\x00"}], -1: 0})
    if "qr-no-key45" in dev or "rev0" in dev:
        del m[4]; del m[5]
    if "qr-hint-unknown" in dev:
        m[5] = "dcp"
    return "FIDO:/" + digits_encode(cbor_encode(m)), m

def parse_advert_datagram(d, eid_key, min_rssi):
    """-> (eid or None, reason). PROTOCOL.md §3, CONTRACT.md proximity stub."""
    if len(d) != 23:
        return None, "wrong length %d" % len(d)
    uuid, rssi = struct.unpack(">Hb", d[:3])
    if uuid not in (0xFFF9, 0xFDE2):
        return None, "unknown service UUID %04X" % uuid
    if rssi < min_rssi:
        return None, "too far (rssi %d < %d)" % (rssi, min_rssi)
    adv = d[3:]
    tag = hmac.new(eid_key[32:], adv[:16], hashlib.sha256).digest()[:4]
    if not hmac.compare_digest(tag, adv[16:]):
        return None, "not ours (tag)"
    eid = aes_block_dec(eid_key[:32], adv[:16])
    if eid[0] != 0:
        return None, "invalid: reserved byte %d" % eid[0]
    dom = struct.unpack("<H", eid[14:16])[0]
    if 2 <= dom < 256:
        return None, "invalid: domain ID %d" % dom
    return eid, "matched rssi %d uuid %04X domain %d" % (rssi, uuid, dom)

def check_getinfo(gi_bytes):
    """The subset of Chromium's ReadCTAPGetInfoResponse PROTOCOL.md §7 names."""
    try:
        gi = cbor_decode(gi_bytes)
    except CBORError as e:
        raise ProtocolError("post-handshake getInfo is not CBOR: %s" % e)
    if cbor_encode(gi) != gi_bytes:
        raise ProtocolError("post-handshake getInfo is not CTAP2 canonical CBOR")
    if not isinstance(gi, dict):
        raise ProtocolError("post-handshake getInfo is not a map")
    v = gi.get(1)
    if not (isinstance(v, list) and v and all(isinstance(x, str) for x in v) and len(set(v)) == len(v)):
        raise ProtocolError("getInfo versions (1) missing, not text or repeated: %r" % (v,))
    if not ({"FIDO_2_0", "FIDO_2_1"} & set(v)):
        raise ProtocolError("getInfo lists no CTAP2 version: %r" % (v,))
    if not (isinstance(gi.get(3), bytes) and len(gi[3]) == 16):
        raise ProtocolError("getInfo aaguid (3) missing or not 16 bytes")
    return gi

def getinfo_aaguid(body):
    """The aaguid (3) of a getInfo answer's CBOR, in hex, or what is wrong with it (for the log)."""
    try:
        gi = cbor_decode(body)
        return gi[3].hex() if isinstance(gi, dict) and isinstance(gi.get(3), bytes) else "(none)"
    except CBORError as e:
        return "(not CBOR: %s)" % e

def parse_auth_data(ad, want_attested):
    if len(ad) < 37:
        raise VerificationFailed("authenticator data is %d bytes, under 37" % len(ad))
    out = {"rpIdHash": ad[:32], "flags": ad[32], "signCount": struct.unpack(">I", ad[33:37])[0]}
    i = 37
    if ad[32] & 0x40:
        if len(ad) < i + 18: raise VerificationFailed("attested credential data cut short")
        out["aaguid"] = ad[i:i + 16]; n = struct.unpack(">H", ad[i + 16:i + 18])[0]; i += 18
        out["credId"] = ad[i:i + n]; i += n
        if len(out["credId"]) != n or n == 0 or n > 1023: raise VerificationFailed("bad credential ID length %d" % n)
        try:
            key, j = cbor_decode_prefix(ad, i)
        except CBORError as e:
            raise VerificationFailed("credential public key is not CBOR: %s" % e)
        out["coseBytes"] = ad[i:j]; out["cose"] = key; i = j
        if cbor_encode(key) != out["coseBytes"]:
            raise ProtocolError("credential public key is not CTAP2 canonical CBOR (a browser fails this registration)")
    elif want_attested:
        raise VerificationFailed("AT flag not set: no attested credential data")
    if ad[32] & 0x80:
        try:
            _, i = cbor_decode_prefix(ad, i)
        except CBORError as e:
            raise VerificationFailed("extensions are not CBOR: %s" % e)
    if i != len(ad):
        raise VerificationFailed("%d bytes after the authenticator data" % (len(ad) - i))
    return out

def cose_to_pub(c):
    if not (isinstance(c, dict) and c.get(1) == 2 and c.get(3) == -7 and c.get(-1) == 1
            and isinstance(c.get(-2), bytes) and len(c[-2]) == 32 and isinstance(c.get(-3), bytes) and len(c[-3]) == 32):
        raise VerificationFailed("credential key is not an ES256 COSE_Key: %r" % (c,))
    try:
        return ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), b"\x04" + c[-2] + c[-3])
    except ValueError:
        raise VerificationFailed("credential key is not a point on P-256")

def client_data(typ, challenge, origin):
    # WebAuthn L3 §5.8.1 serialization (CCDToString), with crossOrigin
    return ('{"type":%s,"challenge":%s,"origin":%s,"crossOrigin":false}' % (
        json.dumps(typ), json.dumps(b64u(challenge)), json.dumps(origin))).encode()

class RPStore:
    def __init__(self, path):
        self.path = path
        if os.path.exists(path):
            try:
                self.data = json.load(open(path))
                assert isinstance(self.data.get("credentials"), list)
            except Exception as e:
                raise Fail("relying-party store %s is damaged: %s" % (path, e))
        else:
            self.data = {"version": 1, "credentials": []}
    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f: json.dump(self.data, f, indent=1)
        os.replace(tmp, self.path)
    def latest(self, rp_id):
        c = [x for x in self.data["credentials"] if x["rpId"] == rp_id]
        return c[-1] if c else None

class Tunnel:
    """Encrypted message layer over the WebSocket, with the desktop's deviations."""
    def __init__(self, ws, k1, k2, log, dev):
        self.ws = ws; self.cr = Crypter(read_key=k2, write_key=k1); self.log = log; self.dev = dev
    def frame(self, m):
        if "odd-padding" in self.dev and len(m) >= 28:   # count byte correct, total not a multiple of 32
            p = m + b"\x00" * 3 + b"\x03"
            if len(p) % 32 == 0: p = p[:-1] + b"\x00\x04"
            return self.cr.encrypt(p, raw_pad=True)
        if "nonzero-padding" in self.dev:
            p = pad(m); p = p[:len(m)] + b"\xaa" * (len(p) - len(m) - 1) + p[-1:]
            return self.cr.encrypt(p, raw_pad=True)
        return self.cr.encrypt(m)
    def send(self, m):
        self.ws.send(self.frame(m))
    def recv(self, what, timeout):
        try:
            c = self.ws.recv(timeout=timeout)
        except WSClosed as e:
            raise TunnelClosed("the tunnel was closed while waiting for %s: %s %s" % (what, e.code, e.reason))
        except socket.timeout:
            raise TimedOut("no %s within %g s" % (what, timeout))
        except ValueError as e:
            raise ProtocolError("waiting for %s: relay broke WebSocket: %s" % (what, e))
        try:
            return self.cr.decrypt(c)
        except Exception as e:
            raise ProtocolError("%s does not decrypt (%d bytes): %s" % (what, len(c), e.__class__.__name__))

def run(args):
    dev = set(filter(None, (args.deviate or "").split(",")))
    t0 = time.time()
    def log(m):
        print("[pydesktop %6.3f] %s" % (time.time() - t0, m), file=sys.stderr, flush=True)
    if not args.relay.startswith("ws://"):
        raise Fail("--relay must be ws://HOST:PORT")
    rhost, rport = args.relay[len("ws://"):].rstrip("/").rsplit(":", 1)
    rp_id = args.rp_id; origin = "https://" + rp_id
    store = RPStore(args.store)
    stored = None
    if args.request == "ga":
        stored = store.latest(rp_id)
        if stored is None:
            raise Fail("no credential for %s in %s: run --request mc first" % (rp_id, args.store))

    # 1. QR code and proximity scanner (bound before the QR is shown, so no advert is lost)
    static = ec.generate_private_key(ec.SECP256R1())
    secret = os.urandom(16)
    eid_key = derive(secret, b"", 1, 64)
    tunnel_id = derive(secret, b"", 2, 16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        udp.bind(("127.0.0.1", args.proximity_port))
    except OSError as e:
        raise TunnelClosed("cannot bind udp://127.0.0.1:%d: %s" % (args.proximity_port, e))
    url, qmap = make_qr(static, secret, args.request, dev)
    print(url, flush=True)
    log("QR shown (%d digits, keys %s); scanning udp://127.0.0.1:%d" % (len(url) - 6, sorted(qmap), args.proximity_port))

    # 2. the advert
    deadline = time.time() + args.timeout
    counts = {}
    eid = None
    while eid is None:
        left = deadline - time.time()
        if left <= 0:
            raise TimedOut("no nearby authenticator within %g s: %s" % (args.timeout, counts or "no datagrams"))
        udp.settimeout(left)
        try:
            d, _ = udp.recvfrom(2048)
        except socket.timeout:
            continue
        eid, why = parse_advert_datagram(d, eid_key, args.min_rssi)
        if eid is None:
            counts[why] = counts.get(why, 0) + 1
        else:
            log("advert " + why + (" (after ignoring %s)" % counts if counts else ""))
    udp.close()
    routing = eid[11:14]
    psk = derive(secret, eid, 3, 32)
    if "wrong-psk" in dev:
        psk = derive(secret, b"\x00" + os.urandom(15), 3, 32)

    # 3. join the tunnel
    rhex, thex = routing.hex().upper(), tunnel_id.hex().upper()
    if "lowercase-ids" in dev:
        rhex, thex = rhex.lower(), thex.lower()
    path = "/cable/connect/%s/%s" % (rhex, thex)
    try:
        ws = WS(rhost, int(rport), path, timeout=10, dev=dev)
    except (ConnectionError, OSError) as e:
        raise TunnelClosed("joining the tunnel %s: %s" % (path, e))
    log("joined %s" % path)

    # 4. Noise KNpsk0
    hs = Initiator(static, psk, dev=dev)
    ws.send(hs.message1())
    try:
        m2 = ws.recv(timeout=10)
    except WSClosed as e:
        raise TunnelClosed("the tunnel was closed while waiting for the handshake response: %s %s" % (e.code, e.reason))
    except socket.timeout:
        raise TimedOut("no handshake response within 10 s")
    k1, k2, hh = hs.read_message2(m2)
    log("handshake done (hash %s...)" % hh.hex()[:16])
    t = Tunnel(ws, k1, k2, log, dev)

    if "garbage-after-handshake" in dev:
        ws.send(os.urandom(64)); log("sent 64 random bytes instead of an encrypted message")
        return expect_closed(t, log, "after the garbage")
    if "close-before-request" in dev:
        log("closing (1000) before any request"); ws.close(1000); return 0

    # 5. post-handshake message (no type byte)
    ph = t.recv("the post-handshake message", 10)
    try:
        phm = cbor_decode(ph)
    except CBORError as e:
        raise ProtocolError("post-handshake message is not CBOR: %s" % e)
    if not isinstance(phm, dict):
        raise ProtocolError("post-handshake message is not a map")
    feats = phm.get(3, ["ctap"])
    if not isinstance(feats, list):
        raise ProtocolError("post-handshake features (3) is not an array")
    if "ctap" in feats and not isinstance(phm.get(1), bytes):
        raise ProtocolError("post-handshake message advertises ctap without a getInfo (1)")
    gi = check_getinfo(phm[1])
    log("post-handshake: features %r, versions %r, aaguid %s" % (feats, gi[1], gi[3].hex()))

    def read_response(what, timeout=args.timeout):
        while True:
            m = t.recv(what, timeout)
            if not m:
                raise ProtocolError("empty frame while waiting for %s" % what)
            if m[0] == 2:
                log("update message from the phone (%d bytes), ignored (no linking offered)" % len(m)); continue
            if m[0] == 0:
                raise ProtocolError("the phone sent a shutdown instead of %s" % what)
            if m[0] != 1:
                raise ProtocolError("message of unknown type %d instead of %s" % (m[0], what))
            if len(m) < 2:
                raise ProtocolError("CTAP frame without a status byte")
            return m[1], m[2:]

    def end(ok_status=0):
        """Ends the transaction as the deviation says (default: encrypted 00, then close)."""
        if "close-no-shutdown" in dev or "rev0" in dev:
            log("closing (1000) without the shutdown message"); ws.close(1000)
        elif "drop-no-shutdown" in dev:
            log("dropping TCP without shutdown or close frame"); ws.sock.close()
        elif "silent-no-shutdown" in dev:
            log("saying nothing; waiting for the phone to end it")
            try:
                ws.recv(timeout=20); log("phone sent a message after the response?!")
            except WSClosed as e:
                log("phone closed: %s %s" % (e.code, e.reason))
            except socket.timeout:
                log("phone did not close within 20 s"); ws.close()
        elif "short-shutdown" in dev:
            ws.send(t.cr.encrypt(b"\x00", raw_pad=True)); log("sent an unpadded 00 (17 bytes)"); ws.close(1000)
        else:
            t.send(b"\x00"); ws.close(1000); log("sent shutdown, closed")
        return ok_status

    # 6. deviations before the request
    if "shutdown-first" in dev:
        t.send(b"\x00"); log("sent shutdown before any request")
        return expect_closed(t, log, "after the early shutdown")
    if "type5" in dev:
        t.send(b"\x05\xa0"); log("sent a frame of type 5")
        return expect_closed(t, log, "after the type-5 frame")
    if "update-message" in dev:
        t.send(b"\x02" + cbor_encode({0: b"\x00" * 492})); log("sent a padding-only update message")
    if "getinfo-first" in dev:
        t.send(b"\x01\x04"); st, body = read_response("the getInfo response", 10)
        log("getInfo answered %s, %d bytes, equal to the post-handshake one: %s, aaguid %s"
            % (status_name(st), len(body), body == phm[1], getinfo_aaguid(body)))
    if "selection-first" in dev:
        t.send(b"\x01\x0b"); st, body = read_response("the authenticatorSelection response", 10)
        log("authenticatorSelection answered %s" % status_name(st))
    if "unsupported-command" in dev or "unsupported-command-only" in dev:
        t.send(b"\x01\x42\xa0"); st, body = read_response("the answer to command 0x42", 10)
        log("command 0x42 answered %s" % status_name(st))
        if "unsupported-command-only" in dev:
            return end(0 if st == 0x01 else 7)
    if "getinfo-only" in dev:
        t.send(b"\x01\x04"); st, body = read_response("the getInfo response", 10)
        log("getInfo answered %s, aaguid %s; ending the transaction without another request" % (status_name(st), getinfo_aaguid(body)))
        return end(0 if st == 0 else 7)
    if "not-cbor-then-request" in dev:
        t.send(b"\x01\x01\xff\xfenot cbor"); st, body = read_response("the answer to a request that is not CBOR", 10)
        log("answered %s; now sending the real request" % status_name(st))
    if "request-not-cbor" in dev:
        t.send(b"\x01" + (b"\x01" if args.request == "mc" else b"\x02") + b"\xff\xfenot cbor at all")
        st, body = read_response("the answer to a request that is not CBOR", 10)
        log("answered %s" % status_name(st))
        end(); return 0 if st == 0x12 else 7
    if "bad-request-tag" in dev:
        c = t.frame(b"\x01\x04"); c = c[:-1] + bytes([c[-1] ^ 1]); ws.send(c)
        log("sent a getInfo whose GCM tag has one bit flipped")
        return expect_closed(t, log, "after the bad tag")

    # 7. the request
    challenge = os.urandom(32)
    if args.request == "mc":
        cdj = client_data("webauthn.create", challenge, origin)
        user_id = os.urandom(16)
        req = {1: hashlib.sha256(cdj).digest(), 2: {"id": rp_id, "name": "Example"},
               3: {"id": user_id, "name": "alice", "displayName": "Alice"},
               4: [{"alg": -7, "type": "public-key"}], 7: {"rk": True}}
        if "big-request" in dev:      # ~ 24 KiB of excludeList entries the phone does not hold
            req[5] = [{"id": os.urandom(64), "type": "public-key"} for _ in range(300)]
        if "huge-request" in dev:     # above the relay's 64 KiB per message
            req[5] = [{"id": os.urandom(200), "type": "public-key"} for _ in range(400)]
        cmd = 0x01
    else:
        cdj = client_data("webauthn.get", challenge, origin)
        cred_id = bytes.fromhex(stored["credentialId"])
        req = {1: rp_id, 2: hashlib.sha256(cdj).digest(), 3: [{"id": cred_id, "type": "public-key"}]}
        if "big-request" in dev:
            req[3] = [{"id": os.urandom(64), "type": "public-key"} for _ in range(300)] + req[3]
        if "huge-request" in dev:
            req[3] = [{"id": os.urandom(200), "type": "public-key"} for _ in range(400)] + req[3]
        cmd = 0x02
    body = b"\x01" + bytes([cmd]) + cbor_encode(req)
    if "rev0" in dev:
        body = bytes([cmd]) + cbor_encode(req)    # revision 0: no type byte
    if "shutdown-with-request" in dev:
        both = t.frame(body) 
        sd = t.frame(b"\x00")
        # two WebSocket messages in one TCP write
        ws.send_frame_pair = None
        with ws.lock:
            ws.sock.sendall(ws_frame(both) + ws_frame(sd))
        log("sent the request and a shutdown in one write")
        return expect_closed(t, log, "after request+shutdown")
    t.send(body)
    log("sent %s request (%d bytes before encryption)" % ("makeCredential" if cmd == 1 else "getAssertion", len(body)))
    st, resp = read_response("the response")
    if st != 0:
        end()
        raise Refused("the phone refused the %s request: %s" % ("makeCredential" if cmd == 1 else "getAssertion", status_name(st)))
    if "second-request" in dev:
        again = {1: rp_id, 2: hashlib.sha256(client_data("webauthn.get", os.urandom(32), origin)).digest()}
        t.send(b"\x01\x02" + cbor_encode(again)); log("sent a second request (getAssertion) after the response")
        try:
            st2, _ = read_response("the answer to the second request", 10)
            log("second request answered %s (the docs say the phone refuses it)" % status_name(st2))
            end(); return 7
        except TunnelClosed as e:
            log("as documented, the phone closed: %s" % e)
            # fall through to verification of the first answer, without sending a shutdown
            ok = verify(args, store, req, resp, cdj, challenge, origin, rp_id, stored, log)
            return ok
    # the response decrypted: the transaction is over; shut down first, then judge (as HybridSim's desktop)
    end()
    return verify(args, store, req, resp, cdj, challenge, origin, rp_id, stored, log)

def ws_frame(payload):
    """one masked binary frame (for writing two messages in one TCP write)"""
    n = len(payload)
    if n < 126: hdr = bytes([0x82, 0x80 | n])
    elif n < 65536: hdr = bytes([0x82, 0x80 | 126]) + struct.pack(">H", n)
    else: hdr = bytes([0x82, 0x80 | 127]) + struct.pack(">Q", n)
    mk = os.urandom(4)
    return hdr + mk + bytes(c ^ mk[i & 3] for i, c in enumerate(payload))

def expect_closed(t, log, what):
    """After a wrong move: the phone must end the tunnel (1011) and send nothing useful."""
    try:
        while True:
            m = t.recv("the phone's reaction " + what, 15)
            log("phone sent a message of type %d (%d bytes)" % (m[0] if m else -1, len(m)))
            if m and m[0] == 1:
                log("the phone ANSWERED: status %s" % status_name(m[1]))
                t.ws.close(1000)
                return 7
    except TunnelClosed as e:
        log(str(e)); return 6
    except Fail as e:
        log(str(e)); return e.code

def verify(args, store, req, resp, cdj, challenge, origin, rp_id, stored, log):
    """The relying party's checks (WebAuthn L3 §7.1 / §7.2)."""
    try:
        r = cbor_decode(resp)
    except CBORError as e:
        raise ProtocolError("the response is not CBOR: %s" % e)
    if not isinstance(r, dict) or cbor_encode(r) != resp:
        raise ProtocolError("the response is not a canonical CBOR map")
    cdh = hashlib.sha256(cdj).digest()
    # our own client data: re-read it as the RP does
    c = json.loads(cdj)
    if c["challenge"] != b64u(challenge) or c["origin"] != origin or c["crossOrigin"] is not False:
        raise VerificationFailed("client data does not match the issued challenge/origin")
    if "credentials" not in store.data: store.data["credentials"] = []
    if 1 in req and isinstance(req.get(2), dict):   # makeCredential
        if c["type"] != "webauthn.create": raise VerificationFailed("type")
        fmt, ad, att = r.get(1), r.get(2), r.get(3)
        if not (isinstance(fmt, str) and isinstance(ad, bytes) and isinstance(att, dict)):
            raise ProtocolError("makeCredential response lacks fmt (1), authData (2) or attStmt (3): keys %r" % sorted(r))
        a = parse_auth_data(ad, True)
        if a["rpIdHash"] != hashlib.sha256(rp_id.encode()).digest():
            raise VerificationFailed("rpIdHash is not SHA-256(%s)" % rp_id)
        if not a["flags"] & 0x01: raise VerificationFailed("UP not set")
        if a["flags"] & 0x10 and not a["flags"] & 0x08: raise VerificationFailed("BS without BE")
        pub = cose_to_pub(a["cose"])
        if fmt != "none" or att != {}:
            raise VerificationFailed("attestation: expected fmt none with {}, got %r %r" % (fmt, att))
        if any(x["credentialId"] == a["credId"].hex() for x in store.data["credentials"]):
            raise VerificationFailed("credential ID already registered")
        store.data["credentials"].append({"rpId": rp_id, "credentialId": a["credId"].hex(),
            "cose": a["coseBytes"].hex(), "signCount": a["signCount"], "userId": req[3]["id"].hex(),
            "userName": req[3]["name"], "be": bool(a["flags"] & 0x08), "createdAt": int(time.time())})
        store.save()
        log("VERIFIED registration: credential %s, flags 0x%02x, signCount %d, fmt none; stored in %s"
            % (b64u(a["credId"]), a["flags"], a["signCount"], args.store))
        print(json.dumps({"id": b64u(a["credId"]), "type": "public-key", "response": {
            "clientDataJSON": b64u(cdj), "authenticatorData": b64u(ad),
            "attestationObject": b64u(cbor_encode({"fmt": fmt, "attStmt": att, "authData": ad}))}}), flush=True)
        return 0
    # getAssertion
    if c["type"] != "webauthn.get": raise VerificationFailed("type")
    cred, ad, sig, user = r.get(1), r.get(2), r.get(3), r.get(4)
    allow = req.get(3) or []
    if cred is None:
        if len(allow) != 1:
            raise ProtocolError("the assertion names no credential and the request allowed %d" % len(allow))
        cred_id = allow[0]["id"]
    elif isinstance(cred, dict) and isinstance(cred.get("id"), bytes):
        cred_id = cred["id"]
    else:
        raise ProtocolError("assertion credential (1) is not a descriptor")
    if not (isinstance(ad, bytes) and isinstance(sig, bytes)):
        raise ProtocolError("assertion lacks authData (2) or signature (3)")
    entry = next((x for x in store.data["credentials"] if x["credentialId"] == cred_id.hex() and x["rpId"] == rp_id), None)
    if entry is None: raise VerificationFailed("unknown credential %s" % b64u(cred_id))
    if allow and cred_id not in [d["id"] for d in allow]: raise VerificationFailed("credential not in allowCredentials")
    if isinstance(user, dict) and "id" in user and user["id"].hex() != entry["userId"]:
        raise VerificationFailed("user handle mismatch")
    if not allow and not (isinstance(user, dict) and "id" in user):
        raise VerificationFailed("no user handle for a discoverable sign-in")
    log("assertion response keys %s, user %r" % (sorted(r), user))
    a = parse_auth_data(ad, False)
    if a["rpIdHash"] != hashlib.sha256(rp_id.encode()).digest(): raise VerificationFailed("rpIdHash mismatch")
    if not a["flags"] & 0x01: raise VerificationFailed("UP not set")
    if a["flags"] & 0x10 and not a["flags"] & 0x08: raise VerificationFailed("BS without BE")
    if bool(a["flags"] & 0x08) != entry.get("be", False): raise VerificationFailed("BE changed since registration")
    pub = cose_to_pub(cbor_decode(bytes.fromhex(entry["cose"])))
    try:
        pub.verify(sig, ad + cdh, ec.ECDSA(hashes.SHA256()))
    except Exception:
        raise VerificationFailed("signature does not verify with the registered key")
    old = entry["signCount"]; new = a["signCount"]
    if (old or new) and new <= old:
        raise VerificationFailed("sign count did not increase (possible cloned authenticator): stored %d, received %d" % (old, new))
    entry["signCount"] = new
    store.save()
    log("VERIFIED assertion: credential %s, flags 0x%02x, signCount %d -> %d, user %s"
        % (b64u(cred_id), a["flags"], old, new, user.get("name") if isinstance(user, dict) else None))
    print(json.dumps({"id": b64u(cred_id), "type": "public-key", "response": {
        "clientDataJSON": b64u(cdj), "authenticatorData": b64u(ad), "signature": b64u(sig),
        "userHandle": b64u(user["id"]) if isinstance(user, dict) and "id" in user else None}}), flush=True)
    return 0

# ----------------------------------------------------------------------------- self test against Vectors/
def selftest(vdir):
    ok = 0; bad = 0
    def check(name, cond):
        nonlocal ok, bad
        if cond: ok += 1
        else: bad += 1; print("FAIL", name)
    L = lambda f: json.load(open(os.path.join(vdir, f)))
    for v in L("digits.json")["vectors"]:
        if "expectError" in v:
            try: digits_decode(v["digits"]); check(v["name"], False)
            except ValueError: check(v["name"], True)
        else:
            check(v["name"] + " enc", digits_encode(bytes.fromhex(v["bytes"])) == v["digits"])
    for v in L("kdf.json")["vectors"]:
        s = bytes.fromhex(v["secret"]); salt = bytes.fromhex(v["salt"])
        out = derive(s, salt, v["type"], v["length"]) if v["kind"] == "derive" else hkdf(s, salt, bytes.fromhex(v["info"]), v["length"])
        check(v["name"], out.hex() == v["output"])
    for v in L("eid.json")["vectors"]:
        if "expectError" in v and "advert" not in v:   # a plaintext to refuse: encrypt it under a key of ours
            k = derive(b"\x07" * 16, b"", 1, 64); pt = bytes.fromhex(v["eidPlaintext"])
            if len(pt) != 16: check(v["name"] + " (not one block)", True); continue
            ct = aes_block(k[:32], pt); adv = ct + hmac.new(k[32:], ct, hashlib.sha256).digest()[:4]
            eid, why = parse_advert_datagram(b"\xff\xf9\xd3" + adv, k, -70)
            check(v["name"] + " refused (%s)" % why, eid is None and why.startswith("invalid")); continue
        if "qrSecret" not in v or "advert" not in v: continue
        sec = bytes.fromhex(v["qrSecret"]); k = derive(sec, b"", 1, 64)
        eid, why = parse_advert_datagram(b"\xff\xf9\xd3" + bytes.fromhex(v["advert"]), k, -70)
        if "expectError" in v: check(v["name"] + " refused (%s)" % why, eid is None)
        else:
            check(v["name"] + " advert (%s)" % why, eid is not None and eid.hex() == v["eidPlaintext"])
            if "psk" in v: check(v["name"] + " psk", derive(sec, eid, 3, 32).hex() == v["psk"])
    cj = L("crypter.json")
    for u in cj["unpad"]:
        try: out = unpad(bytes.fromhex(u["input"])).hex(); check("unpad " + u["input"], out == u.get("output"))
        except ValueError: check("unpad " + u["input"], "expectError" in u)
    t = L("transcript_qr_flow.json")["vectors"][0]; I = t["inputs"]
    static = ec.derive_private_key(int(I["desktop_identity_private_scalar"], 16), ec.SECP256R1())
    check("transcript static pub", compressed(static).hex() == I["desktop_identity_public_compressed"])
    sec = bytes.fromhex(I["qr_secret"])
    qm = {0: compressed(static), 1: sec, 2: 2, 3: I["qr_timestamp"], 4: I["supports_linking"], 5: I["request_type_hint"]}
    check("transcript qr cbor", cbor_encode(qm).hex() == t["qr"]["cbor_hex"])
    check("transcript qr url", "FIDO:/" + digits_encode(cbor_encode(qm)) == t["qr"]["url"])
    ek = derive(sec, b"", 1, 64)
    eid, why = parse_advert_datagram(b"\xff\xf9\xd3" + bytes.fromhex(t["advert"]["advert_20"]), ek, -70)
    check("transcript advert (%s)" % why, eid is not None and eid.hex() == t["advert"]["eid_plaintext_16"])
    check("transcript routing", eid[11:14].hex() == I["routing_id"])
    check("transcript tunnel id", derive(sec, b"", 2, 16).hex() == t["derived"]["tunnel_id_16"])
    psk = derive(sec, eid, 3, 32)
    eph = ec.derive_private_key(int(I["desktop_ephemeral_private_scalar"], 16), ec.SECP256R1())
    trace = []
    hs = Initiator(static, psk, eph_priv=eph, trace=trace)
    check("transcript msg1", hs.message1().hex() == t["noise"]["msg1_desktop_to_phone"])
    k1, k2, hh = hs.read_message2(bytes.fromhex(t["noise"]["msg2_phone_to_desktop"]))
    check("transcript hh", hh.hex() == t["noise"]["handshake_hash"])
    check("transcript k1", k1.hex() == t["noise"]["k1_desktop_write_phone_read"])
    check("transcript k2", k2.hex() == t["noise"]["k2_phone_write_desktop_read"])
    dtrace = [x for x in t["noise"]["trace"] if x["party"] == "desktop" and x["step"] != "init"]
    check("transcript desktop trace length %d/%d" % (len(trace), len(dtrace)), len(trace) == len(dtrace))
    for (step, h, ck, k), ref in zip(trace, dtrace):
        check("trace " + ref["step"], h == ref["h_after"] and ck == ref["ck_after"] and k == ref.get("k_after"))
    cr = Crypter(read_key=k2, write_key=k1)
    for mm in t["post_handshake"]["messages"]:
        c = bytes.fromhex(mm["ciphertext"]); pt = bytes.fromhex(mm["plaintext"])
        if mm["direction"] == "phone->desktop":
            cr.rs = mm["sequence_number"]; check(mm["label"][:40] + " decrypt", cr.decrypt(c) == pt)
        else:
            cr.ws = mm["sequence_number"]; check(mm["label"][:40] + " encrypt", cr.encrypt(pt) == c)
    ph = cbor_decode(bytes.fromhex(t["post_handshake"]["messages"][0]["plaintext"]))
    try: check_getinfo(ph[1]); check("transcript getInfo accepted", True)
    except Fail as e: check("transcript getInfo (%s)" % e, False)
    for v in L("ctap2.json")["vectors"]:
        if v["kind"] == "getInfoResponse" and "expectError" not in v:
            try: check_getinfo(bytes.fromhex(v["hex"])); check("getInfo " + v["name"], True)
            except Fail as e: check("getInfo %s (%s)" % (v["name"], e), False)
    print("selftest: %d passed, %d failed" % (ok, bad))
    return 0 if bad == 0 else 1

def main():
    ap = argparse.ArgumentParser(description="independent hybrid (caBLE v2) desktop for HybridSim's phone")
    sp = ap.add_subparsers(dest="cmd")
    st = sp.add_parser("selftest")
    st.add_argument("--vectors", default=None)
    r = sp.add_parser("run")
    r.add_argument("--relay", required=True, help="ws://HOST:PORT of `hybrid-sim relay`")
    r.add_argument("--proximity-port", type=int, required=True, help="UDP port to scan on 127.0.0.1")
    r.add_argument("--store", required=True, help="this desktop's relying-party store (JSON)")
    r.add_argument("--request", default="mc", choices=["mc", "ga"])
    r.add_argument("--deviate", default="")
    r.add_argument("--rp-id", default="example.com")
    r.add_argument("--min-rssi", type=int, default=-70)
    r.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    if a.cmd == "selftest":
        vdir = a.vectors or os.environ.get("HYBRIDSIM_VECTORS") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "Vectors")
        sys.exit(selftest(vdir))
    if a.cmd == "run":
        try:
            code = run(a)
        except Fail as e:
            print("error: %s" % e, file=sys.stderr); sys.exit(e.code)
        except Exception as e:
            import traceback; traceback.print_exc(); sys.exit(1)
        print("[pydesktop] exit %d" % code, file=sys.stderr); sys.exit(code)
    ap.print_help(); sys.exit(64)

if __name__ == "__main__":
    main()
