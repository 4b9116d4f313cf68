"""TLS on the broker's and name server's listeners, with RocketMQ's ``tls.server.mode``.

Layer: broker.

- ``disabled``: plain remoting only (a TLS client's handshake is not understood);
- ``permissive`` (RocketMQ's default once TLS is configured): plain and TLS on one port,
  told apart by the connection's first byte, 0x16 opening a TLS handshake record (a
  remoting frame starts with its length, whose first byte is 0 for any frame under
  16 MiB), as RocketMQ's ``TlsModeHandler`` sniffs it;
- ``enforcing``: TLS only.

``client_ca_file``: client certificates are required and verified against it (RocketMQ's
``tls.server.need.client.auth=require`` with ``tls.server.trustCertPath``).
"""

from __future__ import annotations

import enum
import os
import shutil
import ssl
import subprocess
import tempfile
from dataclasses import dataclass

from rocketstore.errors import ConfigError
from rocketstore.remoting.tls import make_client_context

__all__ = ["TLS_HANDSHAKE", "ServerTls", "TlsMode", "self_signed_certificate"]

# The content type of a TLS handshake record: a ClientHello's first byte.
TLS_HANDSHAKE = 0x16


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


@dataclass(frozen=True)
class ServerTls:
    cert_file: str
    key_file: str
    mode: TlsMode = TlsMode.PERMISSIVE
    client_ca_file: str | None = None

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.cert_file, self.key_file)
            if self.client_ca_file:
                context.load_verify_locations(self.client_ca_file)
                context.verify_mode = ssl.CERT_REQUIRED
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"TLS: cannot use {self.cert_file} / {self.key_file}: {e}") from e
        return context

    def self_client_context(self) -> ssl.SSLContext:
        """A client context that trusts this certificate (a broker registering with the
        name server it runs beside, which may be enforcing), and presents it when client
        certificates are required (so ``client_ca_file`` must have signed or list it)."""
        if self.client_ca_file:
            return make_client_context(self.cert_file, self.cert_file, self.key_file)
        return make_client_context(self.cert_file)


def self_signed_certificate(days: int = 3650) -> tuple[bytes, bytes]:
    """A fresh self-signed certificate and its key (PEM), for TLS without a configured
    certificate: the 5.x proxy's ``tlsTestModeEnable`` (Netty's SelfSignedCertificate).
    Made by the ``openssl`` command (the standard library cannot make one); it names
    ``localhost`` and 127.0.0.1 / ::1, so a client that verifies the server against it
    (a CA file of this certificate) can connect over loopback."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ConfigError("TLS test mode: the openssl command is not installed")
    with tempfile.TemporaryDirectory(prefix="rocketstore-tls-") as where:
        cert, key = os.path.join(where, "cert.pem"), os.path.join(where, "key.pem")
        try:
            subprocess.run(
                [
                    *(openssl, "req", "-x509", "-newkey", "ec"),
                    *("-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"),
                    *("-days", str(days), "-subj", "/CN=localhost"),
                    *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"),
                    *("-keyout", key, "-out", cert),
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
            with open(cert, "rb") as c, open(key, "rb") as k:
                return c.read(), k.read()
        except (OSError, subprocess.SubprocessError) as e:
            raise ConfigError(f"TLS test mode: openssl could not make a certificate: {e}") from e
