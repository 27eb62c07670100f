#!/usr/bin/env python3
"""A second, independent implementation of Memoria's encrypted sync forms (docs/PROTOCOL.md,
"End-to-end encryption"), written from the document alone: it prints the `e2ee …` test-vector
rows, which must equal the rows in the document (the Rust tests check the same rows).

Needs the `cryptography` package (Argon2id, HKDF, ChaCha20-Poly1305). XChaCha20 is
ChaCha20-Poly1305 under an HChaCha20 subkey (draft-irtf-cfrg-xchacha), which `cryptography`
does not offer, so HChaCha20 is written out below.

Version-2 envelopes hold an LZ4 block, and LZ4 has many valid encodings of one input: this
script has a decoder and no compressor, so it reads the document's `envelope v2` rows, opens
each (the associated data, the payload's framing and padding, the LZ4 block decoding to the
note file, the codec rule, the keyed hash), and seals the opened payload again byte for byte.

    python3 scripts/e2ee-reference.py            # prints the rows
    python3 scripts/e2ee-reference.py --check    # compares them with docs/PROTOCOL.md
"""
import base64, hashlib, hmac, json, re, struct, sys, unicodedata
from pathlib import Path

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def b32(data: bytes) -> str:
    n, count = int.from_bytes(data, "big"), len(data) * 8 // 5
    return "".join(CROCKFORD[(n >> (5 * (count - 1 - i))) & 31] for i in range(count))


def hkdf(ikm: bytes, label: str, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=label.encode()).derive(ikm)


def hchacha20(key: bytes, nonce16: bytes) -> bytes:
    def rotl(v, c):
        return ((v << c) & 0xFFFFFFFF) | (v >> (32 - c))

    def qr(s, a, b, c, d):
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = rotl(s[d] ^ s[a], 16)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = rotl(s[b] ^ s[c], 12)
        s[a] = (s[a] + s[b]) & 0xFFFFFFFF; s[d] = rotl(s[d] ^ s[a], 8)
        s[c] = (s[c] + s[d]) & 0xFFFFFFFF; s[b] = rotl(s[b] ^ s[c], 7)

    s = [0x61707865, 0x3320646E, 0x79622D32, 0x6B206574]
    s += list(struct.unpack("<8I", key)) + list(struct.unpack("<4I", nonce16))
    for _ in range(10):
        qr(s, 0, 4, 8, 12); qr(s, 1, 5, 9, 13); qr(s, 2, 6, 10, 14); qr(s, 3, 7, 11, 15)
        qr(s, 0, 5, 10, 15); qr(s, 1, 6, 11, 12); qr(s, 2, 7, 8, 13); qr(s, 3, 4, 9, 14)
    return struct.pack("<8I", *(s[0:4] + s[12:16]))


def xchacha_seal(key: bytes, nonce: bytes, msg: bytes, aad: bytes) -> bytes:
    sub = hchacha20(key, nonce[:16])
    return ChaCha20Poly1305(sub).encrypt(b"\0\0\0\0" + nonce[16:], msg, aad)


def xchacha_open(key: bytes, nonce: bytes, ct: bytes, aad: bytes) -> bytes:
    sub = hchacha20(key, nonce[:16])
    return ChaCha20Poly1305(sub).decrypt(b"\0\0\0\0" + nonce[16:], ct, aad)


def lz4_block_decode(src: bytes, size: int) -> bytes:
    """The LZ4 block format: sequences of a token (literal length, match length − 4), the
    literals, a 2-byte little-endian offset back into the output and the match; lengths of 15
    continue in bytes of 255. The last sequence is literals only."""
    out, i = bytearray(), 0

    def more(n):
        nonlocal i
        if n == 15:
            while True:
                b = src[i]; i += 1; n += b
                if b != 255:
                    break
        return n

    while True:
        token = src[i]; i += 1
        lit = more(token >> 4)
        out += src[i:i + lit]; i += lit
        if i == len(src):
            break
        off = src[i] | (src[i + 1] << 8); i += 2
        if not 0 < off <= len(out):
            raise ValueError("LZ4 offset outside the output")
        for _ in range(more(token & 15) + 4):
            out.append(out[-off])
    if len(out) != size:
        raise ValueError("LZ4 block decodes to another length")
    return bytes(out)


def subkeys(ak: bytes):
    return (b32(hkdf(ak, "memoria e2ee v1 key id", 10)).lower(),
            hkdf(ak, "memoria e2ee v1 note key", 32),
            hkdf(ak, "memoria e2ee v1 id key", 32),
            hkdf(ak, "memoria e2ee v1 hash key", 32))


def mac(key: bytes, *parts: str) -> bytes:
    return hmac.new(key, b"\0".join(p.encode() for p in parts), hashlib.sha256).digest()


def opaque_id(ak, scope, note_id):
    return b32(mac(subkeys(ak)[2], "note", scope, note_id)[:20]).lower()


def opaque_project(ak, project):
    return b32(mac(subkeys(ak)[2], "project", project)[:20]).lower()


def keyed_hash(ak, scope, content_hash):
    return mac(subkeys(ak)[3], "hash", scope, content_hash).hex()


def recovery_text(rk: bytes) -> str:
    check = hashlib.sha256(b"memoria recovery key v1\0" + rk).digest()[:3]
    sym = b32(rk + check)
    return "-".join(sym[i:i + 4] for i in range(0, len(sym), 4))


def b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def recovery_wrap(ak, rk, nonce):
    kid = subkeys(ak)[0]
    kek = hkdf(rk, "memoria e2ee v1 recovery wrap", 32)
    aad = "\0".join(["memoria e2ee v1 wrap", "recovery", kid, ""]).encode()
    return {"v": 1, "kind": "recovery", "kid": kid, "nonce": b64(nonce),
            "ct": b64(xchacha_seal(kek, nonce, ak, aad))}


def passphrase_wrap(ak, passphrase, m, t, p, salt, nonce):
    kid = subkeys(ak)[0]
    pw = unicodedata.normalize("NFC", passphrase).encode()
    kek = Argon2id(salt=salt, length=32, iterations=t, lanes=p, memory_cost=m).derive(pw)
    aad = "\0".join(["memoria e2ee v1 wrap", "passphrase", kid,
                     f"argon2id v=19 m={m} t={t} p={p}"]).encode()
    return {"v": 1, "kind": "passphrase", "kid": kid,
            "kdf": {"alg": "argon2id", "version": 19, "m": m, "t": t, "p": p},
            "salt": b64(salt), "nonce": b64(nonce), "ct": b64(xchacha_seal(kek, nonce, ak, aad))}


def field(name, value):
    b = value.encode()
    return name.encode() + b" " + str(len(b)).encode() + b"\n" + b + b"\n"


def sync_hash(note_file: str) -> str:
    """The sync-form content hash of a canonical note file without trust, importance, source,
    status or relations (the envelope vectors use only such files)."""
    _, front, body = note_file.split("---\n", 2)
    m = json.loads(front)
    out = b"memoria-note-v2\n" + field("id", m["id"]) + field("summary", m["summary"])
    if m.get("type") is not None:
        out += field("type", m["type"])
    for t in sorted(set(m.get("tags", [])), key=lambda t: t.encode()):
        out += field("tag", t)
    return hashlib.sha256(out + field("body", body.replace("\r\n", "\n"))).hexdigest()


def padme(n: int) -> int:
    e = n.bit_length() - 1
    s = e.bit_length()
    mask = (1 << (e - s)) - 1
    return (n + mask) & ~mask


def envelope(ak, user, scope, note_id, note_file, seq, nonce):
    kid, note_key, _, _ = subkeys(ak)
    oid = opaque_id(ak, scope, note_id)
    kh = keyed_hash(ak, scope, sync_hash(note_file))
    f = note_file.encode()
    payload = struct.pack(">QB", seq, len(note_id)) + note_id.encode() + struct.pack(">I", len(f)) + f
    payload += b"\0" * (padme(len(payload)) - len(payload))
    aad = "\0".join(["memoria e2ee v1 note", kid, user, scope, oid]).encode()
    sealed = nonce + xchacha_seal(note_key, nonce, payload, aad)
    header = {"id": oid, "summary": "", "tags": [], "e2ee": 1, "kid": kid, "hash": kh,
              "sum": hashlib.sha256(sealed).hexdigest()}
    body = "---\n" + json.dumps(header, separators=(",", ":")) + "\n---\n" + b64(sealed)
    return [oid, kh, body]


def envelope_v2(ak, user, scope, note_id, note_file, seq, nonce, documented):
    """Opens the document's body `documented` for these inputs, checks it, and seals what it
    holds again."""
    kid, note_key, _, _ = subkeys(ak)
    oid = opaque_id(ak, scope, note_id)
    kh = keyed_hash(ak, scope, sync_hash(note_file))
    f = note_file.encode()
    aad = "\0".join(["memoria e2ee v2 note", kid, user, scope, oid]).encode()
    sealed = base64.b64decode(documented.rsplit("\n---\n", 1)[1])
    if sealed[:24] != nonce:
        raise ValueError("the documented body is not under the row's nonce")
    payload = xchacha_open(note_key, nonce, sealed[24:], aad)
    head = struct.pack(">QB", seq, len(note_id)) + note_id.encode() + struct.pack(">I", len(f))
    if not payload.startswith(head):
        raise ValueError("the payload's seq, id or file length is not the row's")
    codec, n = struct.unpack(">BI", payload[len(head):len(head) + 5])
    stored = payload[len(head) + 5:len(head) + 5 + n]
    used = len(head) + 5 + n
    if len(stored) != n or len(payload) != padme(used) or any(payload[used:]):
        raise ValueError("the payload's framing or padding is not the format's")
    if codec == 0 and stored != f:
        raise ValueError("codec 0 stores the file as it is")
    if codec == 1 and (len(stored) >= len(f) or lz4_block_decode(stored, len(f)) != f):
        raise ValueError("codec 1 is an LZ4 block of the file, and shorter")
    if codec not in (0, 1):
        raise ValueError("unknown codec")
    sealed = nonce + xchacha_seal(note_key, nonce, payload, aad)
    header = {"id": oid, "summary": "", "tags": [], "e2ee": 2, "kid": kid, "hash": kh,
              "sum": hashlib.sha256(sealed).hexdigest()}
    body = "---\n" + json.dumps(header, separators=(",", ":")) + "\n---\n" + b64(sealed)
    return [oid, kh, body]


def seq_bytes(start, n):
    return bytes(range(start, start + n))


A = seq_bytes(0x00, 32)
B = b"\xff" * 32
R = seq_bytes(0x40, 32)
NOTE = ('---\n{"id":"pricing-borderless-3fa","summary":"Pricing cards use fills, not borders",'
        '"type":"feedback","tags":["design"],"createdAt":1789000000000,"updatedAt":1789000000000}\n'
        '---\nCards are separated by fill and whitespace. See [[pricing-layout-a91]].\n')
NOTE2 = '---\n{"id":"unicode-7","summary":"定价卡片 · Precios","tags":["中文"]}\n---\nLínea 1\r\n第二行\n'
SYNC_VECTOR = "31a170d5b68a115209c0c7f4df03dcb472dbb51eb921ba95aa112b46d004b030"


def rows(doc):
    def row(kind, inp, out):
        j = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
        return f"| e2ee {kind} | `{j(inp)}` | `{j(out)}` |"

    for ak in (A, B):
        kid, n, i, h = subkeys(ak)
        yield row("subkeys", [ak.hex()], [kid, n.hex(), i.hex(), h.hex()])
    for ak, scope, nid in ((A, "user", "pricing-borderless-3fa"),
                           (A, "project:memoria", "pricing-borderless-3fa"),
                           (B, "user", "a")):
        yield row("opaque id", [ak.hex(), scope, nid], opaque_id(ak, scope, nid))
    yield row("opaque project", [A.hex(), "memoria"], opaque_project(A, "memoria"))
    for scope in ("user", "project:memoria"):
        yield row("keyed hash", [A.hex(), scope, SYNC_VECTOR], keyed_hash(A, scope, SYNC_VECTOR))
    for rk in (R, bytes(32)):
        yield row("recovery key", [rk.hex()], recovery_text(rk))
    nonce = seq_bytes(0x60, 24)
    yield row("recovery wrap", [A.hex(), R.hex(), nonce.hex()], recovery_wrap(A, R, nonce))
    salt, nonce = seq_bytes(0x80, 16), seq_bytes(0x90, 24)
    for pw in ("correct horse battery staple", "contrasen\u0303a 定价"):
        yield row("passphrase wrap", [A.hex(), pw, 19456, 1, 1, salt.hex(), nonce.hex()],
                  passphrase_wrap(A, pw, 19456, 1, 1, salt, nonce))
    nonce = seq_bytes(0xb0, 24)
    yield row("envelope", [A.hex(), "alice", "user", "pricing-borderless-3fa", NOTE, 1789000000000, nonce.hex()],
              envelope(A, "alice", "user", "pricing-borderless-3fa", NOTE, 1789000000000, nonce))
    yield row("envelope", [A.hex(), "u-1", "project:memoria", "unicode-7", NOTE2, 1, nonce.hex()],
              envelope(A, "u-1", "project:memoria", "unicode-7", NOTE2, 1, nonce))
    for line in doc.splitlines():
        if line.startswith("| e2ee envelope v2 | `"):
            cells = re.fullmatch(r"\| e2ee envelope v2 \| `(.*)` \| `(.*)` \|", line)
            inp, out = json.loads(cells[1]), json.loads(cells[2])
            ak, user, scope, nid, note_file, seq, n = inp
            yield row("envelope v2", inp,
                      envelope_v2(bytes.fromhex(ak), user, scope, nid, note_file, seq,
                                  bytes.fromhex(n), out[2]))


if __name__ == "__main__":
    doc = (Path(__file__).resolve().parent.parent / "docs" / "PROTOCOL.md").read_text()
    mine = list(rows(doc))
    if "--check" in sys.argv:
        theirs = [l for l in doc.splitlines() if l.startswith("| e2ee ")]
        if mine != theirs:
            sys.exit("docs/PROTOCOL.md's e2ee vectors differ from this implementation's")
        print(f"{len(mine)} e2ee vectors agree with docs/PROTOCOL.md")
    else:
        print("\n".join(mine))
