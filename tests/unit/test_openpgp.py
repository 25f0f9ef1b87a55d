"""The OpenPGP key reader (plugins/module_utils/openpgp.py) against gpg's own fingerprints.

Keys are made by gpg for each run (an Ed25519 key as the lab signs with, an RSA key as NVIDIA
does); the reader must report what `gpg --show-keys --with-colons` reports, for the armoured
and the binary form of the same file.
"""
from __future__ import annotations

import os
import subprocess

import pytest
from ansible_collections.blackwell.sglang.plugins.module_utils import openpgp


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    env = dict(os.environ, GNUPGHOME=str(home))

    def gpg(*args):
        return subprocess.run(["gpg", "--batch", "--quiet", *args], env=env, capture_output=True, check=True).stdout

    for uid, algo in (("ed <ed@example.invalid>", "ed25519"), ("rsa <rsa@example.invalid>", "rsa2048")):
        gpg("--pinentry-mode", "loopback", "--passphrase", "", "--quick-generate-key", uid, algo, "sign", "1d")
    binary = gpg("--export")
    shown = subprocess.run(["gpg", "--batch", "--show-keys", "--with-colons"], input=binary, env=env,
                           capture_output=True, check=True).stdout.decode()
    lines = shown.splitlines()
    # The fpr line right after each pub line is the primary key's.
    primaries = [lines[i + 1].split(":")[9] for i, line in enumerate(lines) if line.startswith("pub:")]
    return {"binary": binary, "armored": gpg("--export", "--armor"), "fingerprints": primaries,
            "each_armored": [gpg("--export", "--armor", fpr) for fpr in primaries]}


def test_binary_and_armoured_files_give_gpgs_fingerprints(keys):
    assert len(keys["fingerprints"]) == 2
    for form in ("binary", "armored"):
        assert openpgp.read_key_file(keys[form])["fingerprints"] == keys["fingerprints"], form


def test_an_armoured_file_is_returned_as_it_was(keys):
    assert openpgp.read_key_file(keys["armored"])["armored"] == keys["armored"].decode()


def test_a_binary_file_is_armoured_into_the_same_packets(keys):
    armored = openpgp.read_key_file(keys["binary"])["armored"]
    assert armored.startswith(openpgp.ARMOR_BEGIN + "\n\n")
    assert openpgp.dearmor(armored.encode()) == keys["binary"]


def test_a_changed_armoured_body_fails_its_checksum(keys):
    text = keys["armored"].decode().splitlines()
    body = next(i for i, line in enumerate(text) if len(line) == 64)
    text[body] = ("A" if text[body][0] != "A" else "B") + text[body][1:]
    with pytest.raises(openpgp.KeyFileError, match="^the armoured key's checksum does not match its body$"):
        openpgp.read_key_file("\n".join(text).encode())


@pytest.mark.parametrize("data, message", [
    (b"not a key", "byte 0 is not the start of an OpenPGP packet"),
    (b"\x99\x00\x10\x04", "the key file ends inside a packet"),
    (b"\xc6\x02\x03\x00", "a version 3 public key (only versions 4 and 6 are read)"),
    (b"\xcd\x01\x00", "no public key packet"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQ==\n", "the armoured key has no -----END PGP PUBLIC KEY BLOCK----- line"
     " after its -----BEGIN PGP PUBLIC KEY BLOCK----- line"),
])
def test_what_is_not_a_key_file_is_named(data, message):
    with pytest.raises(openpgp.KeyFileError) as info:
        openpgp.read_key_file(data)
    assert str(info.value) == message


def test_a_second_key_block_after_the_checked_one_is_refused(keys):
    """The expected key's block followed by another key's block: the fingerprint check reads the
    first block, apt would trust both, so the file is refused; blank lines after the block are
    not a second block."""
    first, second = keys["each_armored"]
    assert openpgp.read_key_file(first + b"\n\n")["fingerprints"] == keys["fingerprints"][:1]
    with pytest.raises(openpgp.KeyFileError) as info:
        openpgp.read_key_file(first + second)
    rest = second.decode().strip()
    assert str(info.value) == (
        f"the file holds {len(rest)} more characters after its first armoured key block"
        " (-----BEGIN PGP PUBLIC KEY BLOCK-----); only that block is checked, so the file is refused: give the"
        " key alone")
