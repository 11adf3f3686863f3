"""Certificates for tests, generated when they run with the ``openssl`` command (nothing private
is ever committed): a CA, a server certificate for 127.0.0.1/localhost signed by it, and client
certificates whose subject names the principal a TLS listener derives from them."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field


def _openssl(*args: str, cwd: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise RuntimeError("the openssl command is needed to generate test certificates (apt-get install openssl)")
    subprocess.run([exe, *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@dataclass
class TestCertificates:
    __test__ = False        # not a pytest test class
    directory: str
    ca_cert: str = ""
    ca_key: str = ""
    server_cert: str = ""
    server_key: str = ""
    server_keystore: str = ""     # key + chain in one PEM file (ssl.keystore.location, type PEM)
    clients: dict[str, tuple[str, str]] = field(default_factory=dict)   # name -> (cert, key)

    @classmethod
    def generate(cls, directory: str, clients=("client",), days: int = 2) -> "TestCertificates":
        os.makedirs(directory, exist_ok=True)
        c = cls(directory)
        d = directory
        c.ca_key, c.ca_cert = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", c.ca_key, "-out", c.ca_cert,
                 "-days", str(days), "-subj", "/CN=kgroup-test-ca", cwd=d)
        c.server_key, c.server_cert = c._signed("server", "/CN=localhost/O=kgroup",
                                                "subjectAltName=IP:127.0.0.1,DNS:localhost")
        c.server_keystore = os.path.join(d, "server.keystore.pem")
        with open(c.server_keystore, "w") as out:
            out.write(open(c.server_key).read() + open(c.server_cert).read())
        for name in clients:
            key, cert = c._signed(name, f"/O=kgroup/OU=test/CN={name}", None)
            c.clients[name] = (cert, key)
        return c

    def _signed(self, name: str, subject: str, san: str | None) -> tuple[str, str]:
        d = self.directory
        key, csr, cert = (os.path.join(d, f"{name}.{ext}") for ext in ("key", "csr", "pem"))
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject, cwd=d)
        args = ["x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key, "-CAcreateserial",
                "-out", cert, "-days", "2", "-sha256"]
        if san:
            ext = os.path.join(d, f"{name}.ext")
            with open(ext, "w") as f:
                f.write(san + "\n")
            args += ["-extfile", ext]
        _openssl(*args, cwd=d)
        return key, cert

    def client_cert(self, name: str = "client") -> tuple[str, str]:
        """(certificate file, key file) of a client."""
        return self.clients[name]
