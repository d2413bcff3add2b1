"""The handshake in which each side proves it holds the server's token without sending it.

A bearer token goes to whoever answers: after the shared server died uncleanly, that may
be another user on its port, who would then hold the token, and the folders and messages
a client sends next. So `sessiond client` and the VS Code extension never send the token:

    client → server   Sessiond-Nonce: N          (fresh, random, base64url)
                      Authorization: Sessiond-Proof HMAC(token, "sessiond client proof\\n" N)
    server → client   101, Sessiond-Proof: HMAC(token, "sessiond server proof\\n" N)

(HMAC-SHA256, lowercase hex; the token as UTF-8 is the key.) The client checks the
server's proof before it sends a single frame. What a stranger learns: a nonce and an
HMAC under a token only the dead server held: nothing to replay anywhere, as every server
makes its own token. The two labels keep one side's proof from serving as the other's.
`Authorization: Bearer` stays accepted (browsers, older clients, docs/headless-clients.md);
the server answers it with its proof too when a nonce came with it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

NONCE_HEADER = "Sessiond-Nonce"
PROOF_HEADER = "Sessiond-Proof"
SCHEME = "Sessiond-Proof"
"""The `Authorization` scheme of a client's proof."""
PROOF_NAME = "hmac-sha256"
"""What a discovery record says its server gives (`"proof"`): a client uses no record
without it, as the token would otherwise have to be sent."""
NONCE = re.compile(r"[A-Za-z0-9_-]{22,128}={0,2}")
"""A nonce a server accepts: base64url of 16 to 96 bytes."""


def new_nonce() -> str:
    return secrets.token_urlsafe(32)


def proof(token: str, role: str, nonce: str) -> str:
    """The HMAC the `role` ("client" or "server") gives for `nonce`."""
    message = f"sessiond {role} proof\n{nonce}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def valid(token: str, role: str, nonce: str, offered: str) -> bool:
    """`offered` is `role`'s proof for `nonce` (compared in constant time)."""
    return hmac.compare_digest(offered.strip().lower().encode(), proof(token, role, nonce).encode())
