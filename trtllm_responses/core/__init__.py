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
    from .loop_steps import LOOP_STEP_SECONDS, LoopSteps, Stepped, at_once, letting_go
    from .wire import (
        LogprobsJSON,
        build_sdk_models,
        exact_bytes,
        held_tokens,
        json_string,
        to_dict,
        to_json,
    )

#: Every name but the two that make faces is resolved on first use, so a layer loads only the core
#: modules it uses (a render worker, ``harmony/render_pool.py``, loads the errors, ids and files alone).
__all__ = lazy_face(globals())
