"""The error tree. Every failure a client can cause or see is one of these.

``APIError`` carries what the OpenAI error envelope needs::

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

and the HTTP status, which each class carries (``status_code``; never set on an instance), with the
headers its answer needs (``headers``: a 405's ``Allow``), and whether it means "this process does not
hold it" (``not_held_here``: a 404, a background response's events kept elsewhere), on which a group of
frontends asks the others (``server/group.py``). The server maps them once
(``server/errors.py``); inside a started SSE stream they become a ``response.failed`` event instead.

    APIError
     ├── InvalidRequestError   400  invalid_request_error   (bad JSON, fields, items, call ids)
     │    ├── MethodNotAllowedError 405                     (a path served with other methods; ``Allow``)
     │    ├── RequestTimeoutError   408                     (a request head or body too slow to arrive)
     │    ├── RequestTooLargeError  413                     (a body past its route's size)
     │    ├── URLTooLongError       414                     (a URL past the head's size)
     │    └── HeadersTooLargeError  431                     (a head too large, or too many headers)
     ├── AuthenticationError   401  invalid_request_error   (missing or wrong API key)
     ├── NotFoundError         404  invalid_request_error   (unknown response id)
     ├── TooManyRequestsError  429  rate_limit_error        (a server-wide budget is used up: running background responses)
     ├── ServerError           500  server_error            (a bug on our side)
     │    └── OverloadedError       503                     (the connection limits; ``Retry-After``)
     └── ServiceUnavailableError 503 service_unavailable_error (the response store cannot be reached)

:func:`status_error` is the class of another status (an HTTP error the framework raises).

``HarmonyFormatError`` is not an API error: the model produced output that does
not follow the Harmony format. The stream turns it into ``response.failed``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import EllipsisType
from typing import Any

__all__ = [  # in the tree's order
    "APIError",
    "InvalidRequestError",
    "MethodNotAllowedError",
    "RequestTimeoutError",
    "RequestTooLargeError",
    "URLTooLongError",
    "HeadersTooLargeError",
    "AuthenticationError",
    "NotFoundError",
    "TooManyRequestsError",
    "ServerError",
    "OverloadedError",
    "ServiceUnavailableError",
    "status_error",
    "HarmonyFormatError",
    "VocabError",
]

_NO_HEADERS: Mapping[str, str] = {}


class APIError(Exception):
    """An error with an HTTP status and an OpenAI-style error body."""

    status_code: int = 500
    error_type: str = "server_error"
    #: The ``code`` of an instance not given one.
    default_code: str | None = None
    #: Headers the HTTP answer carries besides the envelope.
    headers: Mapping[str, str] = _NO_HEADERS
    #: What was asked is not held by this process: another of a group of frontends may hold it, and the
    #: request is handed to it (docs/stores-and-frontends.md#many-frontends-num_serve_frontends).
    not_held_here: bool = False

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None | EllipsisType = ...
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code if code is None or isinstance(code, str) else self.default_code

    def to_dict(self) -> dict[str, Any]:
        """The OpenAI error envelope for this error."""
        return {
            "error": {
                "message": self.message,
                "type": self.error_type,
                "param": self.param,
                "code": self.code,
            }
        }


class InvalidRequestError(APIError):
    """The request is malformed or refers to something that cannot be used (HTTP 400)."""

    status_code = 400
    error_type = "invalid_request_error"


class MethodNotAllowedError(InvalidRequestError):
    """A path this server serves, asked with a method it does not serve there (HTTP 405, with ``Allow``)."""

    status_code = 405

    def __init__(self, method: str, path: str, allowed: Sequence[str]) -> None:
        super().__init__(
            f"{method} is not allowed on {path}; use {' or '.join(allowed)}.", code="method_not_allowed"
        )
        self.headers = {"Allow": ", ".join(allowed)}


class RequestTimeoutError(InvalidRequestError):
    """A request head or body did not arrive in time (HTTP 408)."""

    status_code = 408
    default_code = "request_timeout"


class RequestTooLargeError(InvalidRequestError):
    """A request body larger than its route takes (HTTP 413)."""

    status_code = 413
    default_code = "request_too_large"


class URLTooLongError(InvalidRequestError):
    """A request URL longer than the head may be (HTTP 414)."""

    status_code = 414


class HeadersTooLargeError(InvalidRequestError):
    """A request head too large, or with too many header fields (HTTP 431)."""

    status_code = 431


class AuthenticationError(APIError):
    """The request has no valid ``Authorization: Bearer`` API key (HTTP 401)."""

    status_code = 401
    error_type = "invalid_request_error"
    default_code = "invalid_api_key"


class NotFoundError(APIError):
    """A referenced response does not exist or is no longer stored (HTTP 404)."""

    status_code = 404
    error_type = "invalid_request_error"
    default_code = "not_found"
    not_held_here = True


class TooManyRequestsError(APIError):
    """A server-wide budget is used up (HTTP 429); retry once some of it is free."""

    status_code = 429
    error_type = "rate_limit_error"


class ServerError(APIError):
    """Something failed on our side (HTTP 500). Never raised for client mistakes."""

    status_code = 500
    error_type = "server_error"


class OverloadedError(ServerError):
    """The server is at a connection limit (HTTP 503, ``Retry-After: 1``); retry shortly."""

    status_code = 503
    headers = {"Retry-After": "1"}


class ServiceUnavailableError(APIError):
    """A backend the server needs (the response store) is down or too slow (HTTP 503); retry later."""

    status_code = 503
    error_type = "service_unavailable_error"
    default_code = "service_unavailable"


#: The tree's client errors, by status (read when this module is loaded: no other can have subclassed them yet).
_BY_STATUS: dict[int, type[InvalidRequestError]] = {InvalidRequestError.status_code: InvalidRequestError}
_BY_STATUS.update((cls.status_code, cls) for cls in InvalidRequestError.__subclasses__())


@functools.cache
def status_error(status: int) -> type[InvalidRequestError]:
    """The class of a client error of HTTP ``status`` (an ``invalid_request_error`` answered with it): one of the
    tree's, else a subclass made once for that status."""
    known = _BY_STATUS.get(status)
    if known is not None:
        return known
    doc = f"A request the framework refused with HTTP {status}."
    return type(f"HTTP{status}Error", (InvalidRequestError,), {"status_code": status, "__doc__": doc})


class HarmonyFormatError(ValueError):
    """Model output broke the Harmony format (e.g. a control token inside a message body)."""


class VocabError(RuntimeError):
    """The Harmony vocabulary (o200k_base) is missing or corrupt; the message names the fix."""
