"""TLS for rocketstore's own clients, switched on as RocketMQ's clients switch it on: one
process-wide setting (Java: ``-Dtls.enable=true``, ``tls.client.trustCertPath``...), here
environment variables, so every client of the process (the admin commands, the Spark
source's network mode, a broker's registration) speaks TLS without a parameter each.

Layer: remoting.

- ``ROCKETSTORE_TLS_ENABLE=true``: connect with TLS;
- ``ROCKETSTORE_TLS_CA=FILE``: verify the server's certificate against FILE (without it
  the certificate is not checked, RocketMQ's default ``tls.client.authServer=false``:
  encryption without authentication of the server);
- ``ROCKETSTORE_TLS_CLIENT_CERT`` / ``ROCKETSTORE_TLS_CLIENT_KEY``: the client's own
  certificate, for servers that require one.
"""

from __future__ import annotations

import os
import ssl

from rocketstore.errors import ConfigError

__all__ = [
    "TLS_CA_ENV",
    "TLS_CLIENT_CERT_ENV",
    "TLS_CLIENT_KEY_ENV",
    "TLS_ENABLE_ENV",
    "client_context",
    "make_client_context",
]

TLS_ENABLE_ENV = "ROCKETSTORE_TLS_ENABLE"
TLS_CA_ENV = "ROCKETSTORE_TLS_CA"
TLS_CLIENT_CERT_ENV = "ROCKETSTORE_TLS_CLIENT_CERT"
TLS_CLIENT_KEY_ENV = "ROCKETSTORE_TLS_CLIENT_KEY"


def make_client_context(
    ca_file: str | None = None, cert_file: str | None = None, key_file: str | None = None
) -> ssl.SSLContext:
    """A client context: the server verified against ``ca_file`` (its name not checked:
    brokers are reached by IP), else not verified."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    try:
        if ca_file:
            context.load_verify_locations(ca_file)
            context.verify_mode = ssl.CERT_REQUIRED
            # A server's own (leaf) certificate given as the trust anchor is enough.
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
        else:
            context.verify_mode = ssl.CERT_NONE
        if cert_file:
            context.load_cert_chain(cert_file, key_file or None)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"TLS client setup failed: {e}") from e
    return context


def client_context() -> ssl.SSLContext | None:
    """The process's client TLS context from the environment, None when TLS is off."""
    if os.environ.get(TLS_ENABLE_ENV, "").strip().lower() not in ("true", "1", "yes"):
        return None
    return make_client_context(
        os.environ.get(TLS_CA_ENV) or None,
        os.environ.get(TLS_CLIENT_CERT_ENV) or None,
        os.environ.get(TLS_CLIENT_KEY_ENV) or None,
    )
