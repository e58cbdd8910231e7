"""Secrets in values: how a value taken from the environment is written, and a URL's password kept out.

Pipeline position: a shared contract, below the composition (which writes a secret as a reference), the
launcher (which puts a referenced value into a server's environment), the error messages (which show a
URL's password as ``***``) and the search (which opens its storage with the password put back:
orchestrator.config.secrets.revealed). Pure. Every file, message and pickled job carries the reference,
never the value::

    conceal_url("postgresql+psycopg://team:pw@db/g", "GAUNTLET_SECRET_SEARCH_STORAGE")
    # ("postgresql+psycopg://team:<from $GAUNTLET_SECRET_SEARCH_STORAGE>@db/g", "pw")
    redacted("could not reach postgresql://team:pw@db/g")   # "could not reach postgresql://team:***@db/g"
"""

from __future__ import annotations

import re

#: A value taken from gauntlet's environment at use, as every file and message shows it: composition
#: writes ``${oc.env:HF_TOKEN}`` of a secret as ``<from $HF_TOKEN>`` (orchestrator.config.compose), a URL's
#: password as ``<from $GAUNTLET_SECRET_...>``; only the server's environment (launch.command.child_env)
#: or the connection (orchestrator.config.secrets.revealed) gets the value.
ENV_REFERENCE = re.compile(r"<from \$([A-Za-z_][A-Za-z0-9_]*)>")

#: A URL's scheme, user and password (RFC 3986 userinfo ``user:password@``), as SQLAlchemy splits them: the
#: password runs to the first ``@``. A URL without ``:password`` (``postgresql://team@db/g``) has none.
URL_PASSWORD = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^:/@\s]*):)"
    r"(?P<password>(?:<from \$[A-Za-z_][A-Za-z0-9_]*>|[^@\s])*)@"  # a reference to the environment, or not
)

#: What a redacted password reads as in a message.
REDACTED = "***"

#: The prefix of the variables a URL's password moves to (the name also marks it secret for
#: launch.spec.SECRET_NAME, so no glob of host.env_passthrough ever hands it to a server).
SECRET_PREFIX = "GAUNTLET_SECRET_"


def env_reference(name: str) -> str:
    """How a value of the environment variable ``name`` is written: ``<from $HF_TOKEN>``."""
    return f"<from ${name}>"


def referenced(value: str) -> list[str]:
    """The environment variables ``value`` takes values from (``<from $NAME>``), in order."""
    return ENV_REFERENCE.findall(value)


def url_password(value: str) -> str | None:
    """The password of the first URL in ``value`` that has one (None when none has); a reference to the
    environment (``<from $PGPASS>``) counts as none: it is not the secret itself."""
    for match in URL_PASSWORD.finditer(value):
        password = match.group("password")
        if password and ENV_REFERENCE.fullmatch(password) is None:
            return password
    return None


def password_variable(path: str) -> str:
    """The variable a field's URL password moves to (``search.storage``: GAUNTLET_SECRET_SEARCH_STORAGE)."""
    return SECRET_PREFIX + re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_").upper()


def conceal_url(value: str, variable: str) -> tuple[str, str] | None:
    """``value`` with its URL's password replaced by a reference to ``variable``, and the password; None
    when ``value`` holds no URL with a password (or several: one field, one URL)."""
    found = [m for m in URL_PASSWORD.finditer(value) if url_password(m.group(0))]
    if len(found) != 1:
        return None
    match = found[0]
    concealed = value[: match.start("password")] + env_reference(variable) + value[match.end("password") :]
    return concealed, match.group("password")


def only_password_references(value: str) -> bool:
    """Every ``<from $VAR>`` of ``value`` stands as a URL's password (read back when the URL is used),
    and there is at least one."""
    spans = [m.span("password") for m in URL_PASSWORD.finditer(value)]
    refs = list(ENV_REFERENCE.finditer(value))
    return bool(refs) and all(
        any(start <= r.start() and r.end() <= end for start, end in spans) for r in refs
    )


def redacted(text: str) -> str:
    """``text`` with every URL password shown as ``***`` (a reference to the environment is kept: it names
    where the value comes from, not the value)."""

    def hide(match: re.Match[str]) -> str:
        password = match.group("password")
        if not password or ENV_REFERENCE.fullmatch(password):
            return match.group(0)
        return f"{match.group('head')}{REDACTED}@"

    return URL_PASSWORD.sub(hide, text)
