"""pymysql without `cryptography` until a login needs it.

pymysql imports `cryptography` with its module of logins (`pymysql._auth`), 20-30 ms of
every process's start: a fifth of what pymysql costs to import, a tenth of the daemon's
imports. It is used for one thing only, the RSA exchange of MySQL 8's `sha256_password` and
`caching_sha2_password` over a connection without TLS (`sha2_rsa_encrypt`), which most
connections never make. So pymysql is imported with `cryptography` hidden, and that one
function imports it on its first call, then is pymysql's own again.

Installed by `import replicator` (a finder of the one module: nothing is imported till
something imports pymysql). Where pymysql was imported already, or its module of logins is
not what this was made for (PyMySQL 1.x), nothing changes."""

from __future__ import annotations

import sys
from importlib.machinery import PathFinder

MODULE = "pymysql._auth"


def install() -> None:
    """pymysql's module of logins, once imported, made to import `cryptography` late."""
    if MODULE not in sys.modules and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


class _Finder:
    """Finds `pymysql._auth` as Python would, with a loader that runs it without `cryptography`."""

    def find_spec(self, name, path=None, target=None):
        if name != MODULE:
            return None
        sys.meta_path.remove(self)  # (once)
        spec = PathFinder.find_spec(name, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader)
        return spec


class _Loader:
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        hidden = "cryptography" not in sys.modules
        if hidden:
            sys.modules["cryptography"] = None  # (an import of it fails: pymysql goes without)
        try:
            self._loader.exec_module(module)
        finally:
            if hidden and sys.modules.get("cryptography", 0) is None:
                del sys.modules["cryptography"]
        if hidden:
            _late(module)


def _late(auth) -> None:
    """`sha2_rsa_encrypt` imports `cryptography` on its first call, then is pymysql's own."""
    original = getattr(auth, "sha2_rsa_encrypt", None)
    if original is None or getattr(auth, "_have_cryptography", True):
        return  # (not the module this was made for)

    def sha2_rsa_encrypt(password: bytes, salt: bytes, public_key: bytes) -> bytes:
        try:
            from cryptography.hazmat.backends import default_backend
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import padding
        except ImportError:
            return original(password, salt, public_key)  # (which says the package is missing)
        # what pymysql's import would have set (every caller sets the same: no lock needed)
        auth.default_backend, auth.hashes = default_backend, hashes
        auth.serialization, auth.padding = serialization, padding
        auth._have_cryptography = True
        auth.sha2_rsa_encrypt = original
        return original(password, salt, public_key)

    auth.sha2_rsa_encrypt = sha2_rsa_encrypt
