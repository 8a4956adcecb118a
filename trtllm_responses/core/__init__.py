"""What every layer shares and that imports nothing else of the package.

``errors.py`` (the exception tree, each mapped once to OpenAI's error body), ``ids.py`` (minting
and checking ids), ``wire.py`` (JSON for the wire), ``bounded_cache.py`` (a byte-bounded LRU),
``files.py`` (atomic writes, hashes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_face, resolver

if TYPE_CHECKING:
    from .bounded_cache import ByteBoundedCache
    from .errors import (
        APIError,
        AuthenticationError,
        HarmonyFormatError,
        HeadersTooLargeError,
        InvalidRequestError,
        MethodNotAllowedError,
        NotFoundError,
        OverloadedError,
        RequestTimeoutError,
        RequestTooLargeError,
        ServerError,
        ServiceUnavailableError,
        TooManyRequestsError,
        URLTooLongError,
        VocabError,
        status_error,
    )
    from .files import sha256_file, write_atomically
    from .ids import check_id, new_id
    from .loop_steps import LOOP_STEP_SECONDS, LoopSteps
    from .wire import (
        LogprobsJSON,
        build_sdk_models,
        exact_bytes,
        held_tokens,
        json_string,
        to_dict,
        to_json,
    )

__all__ = [
    "lazy_face",
    "resolver",
    "APIError",
    "AuthenticationError",
    "ByteBoundedCache",
    "HarmonyFormatError",
    "HeadersTooLargeError",
    "InvalidRequestError",
    "LOOP_STEP_SECONDS",
    "LogprobsJSON",
    "LoopSteps",
    "MethodNotAllowedError",
    "NotFoundError",
    "OverloadedError",
    "RequestTimeoutError",
    "RequestTooLargeError",
    "ServerError",
    "ServiceUnavailableError",
    "TooManyRequestsError",
    "URLTooLongError",
    "VocabError",
    "build_sdk_models",
    "check_id",
    "exact_bytes",
    "held_tokens",
    "json_string",
    "new_id",
    "sha256_file",
    "to_dict",
    "status_error",
    "to_json",
    "write_atomically",
]

#: Every name is resolved on first use, so a layer loads only the core modules it uses (a render
#: worker, ``harmony/render_pool.py``, loads the errors, ids and files alone).
_ON_FIRST_USE = {
    "ByteBoundedCache": ".bounded_cache",
    "APIError": ".errors",
    "AuthenticationError": ".errors",
    "HarmonyFormatError": ".errors",
    "InvalidRequestError": ".errors",
    "NotFoundError": ".errors",
    "ServerError": ".errors",
    "ServiceUnavailableError": ".errors",
    "TooManyRequestsError": ".errors",
    "VocabError": ".errors",
    "HeadersTooLargeError": ".errors",
    "MethodNotAllowedError": ".errors",
    "OverloadedError": ".errors",
    "RequestTimeoutError": ".errors",
    "RequestTooLargeError": ".errors",
    "URLTooLongError": ".errors",
    "status_error": ".errors",
    "sha256_file": ".files",
    "write_atomically": ".files",
    "LOOP_STEP_SECONDS": ".loop_steps",
    "LoopSteps": ".loop_steps",
    "check_id": ".ids",
    "new_id": ".ids",
    "LogprobsJSON": ".wire",
    "build_sdk_models": ".wire",
    "exact_bytes": ".wire",
    "held_tokens": ".wire",
    "json_string": ".wire",
    "to_dict": ".wire",
    "to_json": ".wire",
}

if not TYPE_CHECKING:  # a type checker reads the imports above; this resolves them at run time
    __getattr__ = resolver(__name__, _ON_FIRST_USE)
