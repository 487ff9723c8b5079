#!/usr/bin/env python3
"""A plain transcription of FF1 (NIST SP 800-38G, Algorithm 7) on Python's big integers, used to
make the long-string vectors of ff1_test.cc: lengths where FF1's rounds need more than 64 bits
(the C++ big-number path), d > 16 (several blocks of S) and tweaks of several blocks. It shares no
code with src/order/ff1.cc; it is checked against NIST's nine samples first.

Usage: tests/unit/ff1_reference.py   (needs python3-cryptography)
"""
import math

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def aes(key, block):
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(block) + enc.finalize()


def prf(key, data):
    y = bytes(16)
    for i in range(0, len(data), 16):
        y = aes(key, bytes(a ^ b for a, b in zip(y, data[i:i + 16])))
    return y


def num(x, radix):
    v = 0
    for d in x:
        v = v * radix + d
    return v


def string(v, radix, m):
    out = []
    for _ in range(m):
        out.append(v % radix)
        v //= radix
    return out[::-1]


def ff1_encrypt(key, tweak, radix, x):
    n, t = len(x), len(tweak)
    u = n // 2
    v = n - u
    a, b = x[:u], x[u:]
    # b = ceil(ceil(v * log2(radix)) / 8), exactly: the bit length of radix^v - 1.
    bb = ((radix ** v - 1).bit_length() + 7) // 8
    d = 4 * math.ceil(bb / 4) + 4
    p = bytes([1, 2, 1]) + radix.to_bytes(3, "big") + bytes([10, u % 256]) + n.to_bytes(4, "big") + \
        t.to_bytes(4, "big")
    for i in range(10):
        q = tweak + bytes((-t - bb - 1) % 16) + bytes([i]) + num(b, radix).to_bytes(bb, "big")
        r = prf(key, p + q)
        s = r
        j = 1
        while len(s) < d:
            s += aes(key, bytes(a ^ c for a, c in zip(r, j.to_bytes(16, "big"))))
            j += 1
        y = int.from_bytes(s[:d], "big")
        m = u if i % 2 == 0 else v
        c = (num(a, radix) + y) % radix ** m
        a, b = b, string(c, radix, m)
    return a + b


def text(x):
    return "".join(ALPHABET[d] for d in x)


def digits(s):
    return [ALPHABET.index(c) for c in s]


K128 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3C")
K192 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F")
K256 = bytes.fromhex("2B7E151628AED2A6ABF7158809CF4F3CEF4359D8D580AA4F7F036D6F04FC6A94")
T10 = bytes.fromhex("39383736353433323130")
T11 = bytes.fromhex("3737373770717273373737")

NIST = [
    (K128, b"", 10, "0123456789", "2433477484"),
    (K128, T10, 10, "0123456789", "6124200773"),
    (K128, T11, 36, "0123456789abcdefghi", "a9tv40mll9kdu509eum"),
    (K192, b"", 10, "0123456789", "2830668132"),
    (K192, T10, 10, "0123456789", "2496655549"),
    (K192, T11, 36, "0123456789abcdefghi", "xbj3kv35jrawxv32ysr"),
    (K256, b"", 10, "0123456789", "6657667009"),
    (K256, T10, 10, "0123456789", "1001623463"),
    (K256, T11, 36, "0123456789abcdefghi", "xs8a0azh2avyalyzuwd"),
]

if __name__ == "__main__":
    for key, tweak, radix, pt, ct in NIST:
        assert text(ff1_encrypt(key, tweak, radix, digits(pt))) == ct, (radix, pt)
    long_tweak = bytes(range(40))
    cases = [
        (K128, b"", 10, (ALPHABET[:10] * 4)[:40]),
        (K192, T10, 10, (ALPHABET[:10] * 7)[:64]),
        (K256, long_tweak, 36, (ALPHABET[:36] * 2)[:50]),
        (K128, T11, 62, ALPHABET[:62] + "01"),
        (K256, b"", 2, "01" * 32),
        (K192, long_tweak, 32, (ALPHABET[:32] * 2)[:33]),
    ]
    for key, tweak, radix, pt in cases:
        ct = text(ff1_encrypt(key, tweak, radix, digits(pt)))
        print(f'{{{len(key) * 8}, "{tweak.hex()}", {radix}, "{pt}", "{ct}"}},')
