# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fingerprints of the OpenPGP public keys in a key file, without gpg.

A stock minimal Debian or Ubuntu node has gpgv (apt verifies with it) but not gpg, which is
what could list a key file's fingerprints. The fingerprint is defined by RFC 4880 (version 4
keys: SHA-1 over 0x99, the two-byte body length and the public-key packet's body) and
RFC 9580 (version 6 keys: SHA-256 over 0x9B, a four-byte length and the body), so it is
computed here from the packets themselves. Pure functions on bytes, no Ansible imports.

Only primary keys (packet tag 6) are reported: they are what a key file's holder vouches for,
and what apt's Signed-By trusts together with their subkeys.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re

ARMOR_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
ARMOR_END = "-----END PGP PUBLIC KEY BLOCK-----"
TAG_PUBLIC_KEY = 6
_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")


class KeyFileError(ValueError):
    """The bytes are not an OpenPGP public key file this reader understands."""


def crc24(data):
    crc = _CRC24_INIT
    for byte in bytearray(data):
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= _CRC24_POLY
    return crc & 0xFFFFFF


def is_armored(data):
    return data.lstrip()[:len(ARMOR_BEGIN)] == ARMOR_BEGIN.encode("ascii")


def dearmor(data):
    """The binary packets of the first ASCII-armoured public key block in data."""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise KeyFileError("the armoured key holds bytes that are not ASCII")
    lines = [line.strip() for line in text.splitlines()]
    try:
        start = lines.index(ARMOR_BEGIN) + 1
        end = lines.index(ARMOR_END, start)
    except ValueError:
        raise KeyFileError("the armoured key has no %s line after its %s line" % (ARMOR_END, ARMOR_BEGIN))
    body = lines[start:end]
    # Armour headers ("Version: ...", "Comment: ...") come before the first blank line.
    while body and _HEADER.match(body[0]):
        body.pop(0)
    checksum = None
    if body and body[-1].startswith("=") and len(body[-1]) == 5:
        checksum = body.pop()[1:]
    try:
        packets = base64.b64decode("".join(body).encode("ascii"), validate=True)
    except (binascii.Error, ValueError):
        raise KeyFileError("the armoured key's body is not base64")
    if checksum is not None:
        try:
            expected = bytearray(base64.b64decode(checksum.encode("ascii"), validate=True))
        except (binascii.Error, ValueError):
            raise KeyFileError("the armoured key's checksum line is not base64")
        if (expected[0] << 16 | expected[1] << 8 | expected[2]) != crc24(packets):
            raise KeyFileError("the armoured key's checksum does not match its body")
    return packets


def armor(packets):
    """ASCII armour for binary key packets (the form apt reads from a .asc keyring)."""
    encoded = base64.b64encode(packets).decode("ascii")
    crc = crc24(packets)
    lines = [ARMOR_BEGIN, ""]
    lines.extend(encoded[i:i + 64] for i in range(0, len(encoded), 64))
    lines.append("=" + base64.b64encode(bytes(bytearray([crc >> 16, (crc >> 8) & 0xFF, crc & 0xFF]))).decode("ascii"))
    lines.append(ARMOR_END)
    return "\n".join(lines) + "\n"


def packets(data):
    """(tag, body) of each OpenPGP packet in data, old and new packet formats alike."""
    data = bytearray(data)
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise KeyFileError("byte %d is not the start of an OpenPGP packet" % pos)
        pos += 1
        if head & 0x40:
            tag = head & 0x3F
            length, pos = _new_length(data, pos)
        else:
            tag = (head >> 2) & 0x0F
            kind = head & 0x03
            if kind == 3:
                raise KeyFileError("a packet of indeterminate length is not a key file's packet")
            size = (1, 2, 4)[kind]
            if pos + size > len(data):
                raise KeyFileError("the key file ends inside a packet header")
            length = 0
            for byte in data[pos:pos + size]:
                length = length << 8 | byte
            pos += size
        if pos + length > len(data):
            raise KeyFileError("the key file ends inside a packet")
        yield tag, bytes(data[pos:pos + length])
        pos += length


def _new_length(data, pos):
    if pos >= len(data):
        raise KeyFileError("the key file ends inside a packet header")
    first = data[pos]
    if first < 192:
        return first, pos + 1
    if first < 224:
        if pos + 1 >= len(data):
            raise KeyFileError("the key file ends inside a packet header")
        return ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
    if first == 255:
        if pos + 4 >= len(data):
            raise KeyFileError("the key file ends inside a packet header")
        return data[pos + 1] << 24 | data[pos + 2] << 16 | data[pos + 3] << 8 | data[pos + 4], pos + 5
    raise KeyFileError("a packet of partial length is not a key file's packet")


def fingerprint(body):
    """The fingerprint of one public-key packet body, upper-case hex."""
    version = bytearray(body[:1])[0] if body else 0
    if version == 4:
        digest = hashlib.sha1(b"\x99" + bytes(bytearray([len(body) >> 8, len(body) & 0xFF])) + body)
    elif version == 6:
        size = len(body)
        digest = hashlib.sha256(b"\x9b" + bytes(bytearray([size >> 24, (size >> 16) & 0xFF, (size >> 8) & 0xFF, size & 0xFF])) + body)
    else:
        raise KeyFileError("a version %d public key (only versions 4 and 6 are read)" % version)
    return digest.hexdigest().upper()


def read_key_file(data):
    """{'fingerprints': [...], 'armored': text} for a key file in either form.

    The armoured text is the file itself when it already was armoured, so installing it
    writes the bytes that were checked; binary files are armoured here.
    """
    if is_armored(data):
        binary = dearmor(data)
        text = data.decode("ascii")
        # The fingerprint check covers the first block only, and apt would trust every block of
        # the file it is given: a file must be exactly the block that was checked.
        rest = text.split(ARMOR_END, 1)[1].strip()
        if rest:
            raise KeyFileError("the file holds %d more characters after its first armoured key block (%s); only"
                               " that block is checked, so the file is refused: give the key alone"
                               % (len(rest), rest.splitlines()[0][:40]))
    else:
        binary = bytes(data)
        text = None
    found = [fingerprint(body) for tag, body in packets(binary) if tag == TAG_PUBLIC_KEY]
    if not found:
        raise KeyFileError("no public key packet")
    return {"fingerprints": found, "armored": text if text is not None else armor(binary)}
