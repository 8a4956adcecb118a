"""The error tree. Every failure a client can cause or see is one of these.

``APIError`` carries what the OpenAI error envelope needs::

    {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}

and the HTTP status. The server maps them once (``server/errors.py``); inside a
started SSE stream they become a ``response.failed`` event instead.

    APIError
     ├── InvalidRequestError   400  invalid_request_error   (bad JSON, fields, items, call ids; 413 for a body too large)
     ├── AuthenticationError   401  invalid_request_error   (missing or wrong API key)
     ├── NotFoundError         404  invalid_request_error   (unknown response id)
     ├── TooManyRequestsError  429  rate_limit_error        (a server-wide budget is used up: running background responses)
     ├── ServerError           500  server_error            (a bug on our side)
     └── ServiceUnavailableError 503 service_unavailable_error (the response store cannot be reached)

``HarmonyFormatError`` is not an API error: the model produced output that does
not follow the Harmony format. The stream turns it into ``response.failed``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APIError",
    "AuthenticationError",
    "HarmonyFormatError",
    "InvalidRequestError",
    "NotFoundError",
    "ServerError",
    "ServiceUnavailableError",
    "TooManyRequestsError",
    "VocabError",
]


class APIError(Exception):
    """An error with an HTTP status and an OpenAI-style error body."""

    status_code: int = 500
    error_type: str = "server_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.code = code

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


class AuthenticationError(APIError):
    """The request has no valid ``Authorization: Bearer`` API key (HTTP 401)."""

    status_code = 401
    error_type = "invalid_request_error"

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = "invalid_api_key"
    ) -> None:
        super().__init__(message, param=param, code=code)


class NotFoundError(APIError):
    """A referenced response does not exist or is no longer stored (HTTP 404)."""

    status_code = 404
    error_type = "invalid_request_error"

    def __init__(self, message: str, *, param: str | None = None, code: str | None = "not_found") -> None:
        super().__init__(message, param=param, code=code)


class TooManyRequestsError(APIError):
    """A server-wide budget is used up (HTTP 429); retry once some of it is free."""

    status_code = 429
    error_type = "rate_limit_error"


class ServerError(APIError):
    """Something failed on our side (HTTP 500). Never raised for client mistakes."""

    status_code = 500
    error_type = "server_error"


class ServiceUnavailableError(APIError):
    """A backend the server needs (the response store) is down or too slow (HTTP 503); retry later."""

    status_code = 503
    error_type = "service_unavailable_error"

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = "service_unavailable"
    ) -> None:
        super().__init__(message, param=param, code=code)


class HarmonyFormatError(ValueError):
    """Model output broke the Harmony format (e.g. a control token inside a message body)."""


class VocabError(RuntimeError):
    """The Harmony vocabulary (o200k_base) is missing or corrupt; the message names the fix."""
