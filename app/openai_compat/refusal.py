"""A request refused, as OpenAI's error says it: status, message, the parameter, a code.

Kept apart from the HTTP layer because batch files are checked by the same
rules and turn the same refusal into an error record instead of a response.
"""

from __future__ import annotations


class RequestError(ValueError):
    """{"error": {"message", "type", "param", "code"}} with an HTTP `status`."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind


def bad(param: str, message: str) -> RequestError:
    return RequestError(400, message, param, "invalid_value")
