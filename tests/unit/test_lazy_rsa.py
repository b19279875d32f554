"""pymysql imported without `cryptography` (`replicator/lazy_rsa.py`), and its RSA login
exchange still right: each case runs in an interpreter of its own, where nothing was
imported before."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

# the password as MySQL 8's RSA exchange sends it, read back with the private key
ROUND_TRIP = """
import json, sys
{first}
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from pymysql import _auth
key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
oaep = padding.OAEP(mgf=padding.MGF1(algorithm=hashes.SHA1()), algorithm=hashes.SHA1(), label=None)
salt = b"0123456789abcdefghij"
sent = [_auth._xor_password(key.decrypt(_auth.sha2_rsa_encrypt(b"s3cret", salt, pem), oaep), salt).decode()
        for _ in range(2)]
print(json.dumps({{"hidden": hidden, "sent": sent}}))
"""


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "first, hidden",
    [
        # ours first: pymysql comes without it, the exchange imports it on its first call
        ("import replicator, pymysql.connections; hidden = 'cryptography' not in sys.modules", True),
        # pymysql imported before ours: as it is
        ("import pymysql, replicator; hidden = 'cryptography' not in sys.modules", False),
    ],
)
def test_the_rsa_exchange_sends_the_password(first: str, hidden: bool) -> None:
    got = _run(ROUND_TRIP.format(first=first))
    assert got == {"hidden": hidden, "sent": ["s3cret\x00", "s3cret\x00"]}


def test_a_command_that_needs_no_server_imports_no_pymysql() -> None:
    got = _run("import json, sys, replicator, replicator.config; print(json.dumps({'p': 'pymysql' in sys.modules}))")
    assert got == {"p": False}
