"""ACL credentials of the commands that talk to running brokers and name servers:
``--access-key`` / ``--secret-key`` (or ROCKETSTORE_ACCESS_KEY / ROCKETSTORE_SECRET_KEY),
with which every request is signed as mqadmin signs with its ``AclClientRPCHook``
(:mod:`rocketstore.remoting.acl_signing`, the signer the broker checks with).

Layer: cli (top). The secret is never printed: click shows no default or environment value
for it, and the credentials' repr leaves it out.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from rocketstore.cli.context import CliError
from rocketstore.remoting.acl_signing import SessionCredentials

ACCESS_KEY_ENV = "ROCKETSTORE_ACCESS_KEY"
SECRET_KEY_ENV = "ROCKETSTORE_SECRET_KEY"


def credentials_of(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """The account to sign with, None when neither key is given; a CliError when only one
    is (an unsigned request would be refused by the broker with a less helpful message)."""
    access_key = (access_key or "").strip() or None
    if access_key is None and not secret_key:
        return None
    if access_key is None:
        raise CliError(f"--secret-key needs --access-key (or ${ACCESS_KEY_ENV})")
    if not secret_key:
        raise CliError(f"--access-key needs --secret-key (or ${SECRET_KEY_ENV})")
    return SessionCredentials(access_key, secret_key)


def credential_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Adds --access-key / --secret-key to a command and hands it ``credentials``
    (SessionCredentials or None) in their place."""

    @functools.wraps(func)
    def wrapper(*args: Any, access_key: str | None, secret_key: str | None, **kwargs: Any) -> Any:
        return func(*args, credentials=credentials_of(access_key, secret_key), **kwargs)

    wrapper = click.option(
        "--secret-key",
        "secret_key",
        envvar=SECRET_KEY_ENV,
        show_envvar=False,
        metavar="SECRET",
        help=f"Its secret key; prefer ${SECRET_KEY_ENV} (a command line is visible to "
        f"other users in ps). Example: {SECRET_KEY_ENV}=... rocketstore ... (or "
        "--secret-key 1234567)",
    )(wrapper)
    wrapper = click.option(
        "--access-key",
        "access_key",
        envvar=ACCESS_KEY_ENV,
        show_envvar=False,
        metavar="KEY",
        help="ACL account: sign every request with it, as mqadmin's AclClientRPCHook "
        f"does (or ${ACCESS_KEY_ENV}). Example: --access-key rocketmq2",
    )(wrapper)
    return wrapper
