"""ASGI ``Idempotency-Key`` middleware over idem for Starlette and FastAPI (see :mod:`.middleware`)::

from idem_client import AsyncClient
from idem_client.asgi import IdempotencyMiddleware

app = FastAPI()
app.add_middleware(IdempotencyMiddleware, client=AsyncClient(["127.0.0.1:7400"]),
                   tenant="acme", environment="live", actor=lambda scope: user_of(scope))
"""

from .handle import IdempotencyHandle
from .key_header import MalformedKey, parse_key
from .middleware import IdempotencyMiddleware
from .policy import IdempotencyPolicy
from .problem import PROBLEM_BASE, Problem

__all__ = [
    "PROBLEM_BASE",
    "IdempotencyHandle",
    "IdempotencyMiddleware",
    "IdempotencyPolicy",
    "MalformedKey",
    "Problem",
    "parse_key",
]
