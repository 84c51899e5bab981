"""Bearer tokens scoped per session and per right (``read`` / ``write``).

A grant says: this token may ``read`` and/or ``write`` this session (``*``: every
session). Tokens come from a file or an environment variable, one grant a line::

    # token            session      rights
    s3cr3t-agent-1     sess-42      write
    s3cr3t-viewer      sess-42      read
    s3cr3t-admin       *            read,write

Blank lines and ``#`` comments are skipped; in the environment variable, ``;`` also
separates grants. A token may appear on several lines (several sessions).

Comparison is constant-time: the presented token is hashed and compared with
:func:`hmac.compare_digest` against *every* configured token's hash, without stopping
at the first match, so timing reveals neither which token matched nor how much of a
guess was right.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import Literal

import msgspec

__all__ = ["Grant", "Right", "Tokens"]

Right = Literal["read", "write"]
_RIGHTS: tuple[Right, ...] = ("read", "write")


class Grant(msgspec.Struct, frozen=True):
    """One token's rights on one session (``*`` for all)."""

    token: str
    session: str
    rights: frozenset[Right]


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


class Tokens:
    """The configured grants and the constant-time check of a presented token."""

    def __init__(self, grants: Iterable[Grant]) -> None:
        self._grants = [(_digest(grant.token), grant) for grant in grants]
        if not self._grants:
            raise ValueError("no tokens configured")

    @classmethod
    def parse(cls, text: str, *, origin: str = "tokens") -> Tokens:
        """Grants from ``token session rights`` lines; errors name the line."""
        grants: list[Grant] = []
        for number, raw in enumerate(text.replace(";", "\n").splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            if len(fields) != 3:
                raise ValueError(
                    f"{origin} line {number}: expected `TOKEN SESSION RIGHTS`, got {len(fields)} "
                    "field(s)"
                )
            token, session, rights_text = fields
            rights: set[Right] = set()
            for right in rights_text.split(","):
                if right not in _RIGHTS:
                    raise ValueError(
                        f"{origin} line {number}: unknown right {right!r} (read, write)"
                    )
                rights.add(right)
            if len(token) < 16:
                raise ValueError(f"{origin} line {number}: token shorter than 16 characters")
            grants.append(Grant(token, session, frozenset(rights)))
        return cls(grants)

    def _matching(self, presented: str) -> list[Grant]:
        digest = _digest(presented)
        matches: list[Grant] = []
        for stored, grant in self._grants:
            # no early exit: every stored digest is compared, whatever the outcome
            if hmac.compare_digest(stored, digest):
                matches.append(grant)
        return matches

    def known(self, presented: str) -> bool:
        """Whether the token is configured at all (401 vs 403)."""
        return bool(self._matching(presented))

    def allows(self, presented: str, session_id: str, right: Right) -> bool:
        """Whether the token grants ``right`` on ``session_id``."""
        return any(
            right in grant.rights and grant.session in ("*", session_id)
            for grant in self._matching(presented)
        )

    def readable_sessions(self, presented: str) -> set[str] | None:
        """The sessions the token may read; ``None`` means every session."""
        sessions: set[str] = set()
        for grant in self._matching(presented):
            if "read" in grant.rights:
                if grant.session == "*":
                    return None
                sessions.add(grant.session)
        return sessions
