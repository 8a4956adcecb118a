"""Where the first complete JSON value of a tool call's arguments ends, found as they stream.

gpt-oss sometimes writes on after a complete arguments object: prose, a second object
(vLLM and llama.cpp parsers see the same). The call's arguments are its first complete JSON
value; what follows is dropped (and logged), never passed to the tool or the client. Under
guided decoding the grammar ends the body there, so this never cuts anything.

:class:`JsonCut` scans each delta once (a character loop, on call arguments only, never on
message text) and returns the part to keep, so streamed deltas and the done arguments agree.
"""

from __future__ import annotations

__all__ = ["JsonCut"]

_OPEN = frozenset("{[")
_CLOSE = frozenset("}]")


class JsonCut:
    """Keeps text up to the end of the first complete JSON object or array; drops the rest.

    Text that does not start (after whitespace) with ``{`` or ``[`` is kept whole: there is no
    value to find the end of, and the tool reports its own error.
    """

    __slots__ = ("_depth", "_escape", "_in_string", "_started", "done", "dropped")

    def __init__(self) -> None:
        self._depth = 0
        self._in_string = False
        self._escape = False
        self._started: bool | None = None  # None: only whitespace so far; False: not JSON
        self.done = False
        self.dropped: list[str] = []

    def feed(self, text: str) -> str:
        """The part of ``text`` to keep."""
        if self.done:
            self.dropped.append(text)
            return ""
        if self._started is False:
            return text
        depth = self._depth
        in_string = self._in_string
        escape = self._escape
        for i, char in enumerate(text):
            if self._started is None:
                if char.isspace():
                    continue
                if char not in _OPEN:
                    self._started = False
                    return text
                self._started = True
            if in_string:
                if escape:
                    escape = False
                elif char == "\\":
                    escape = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char in _OPEN:
                depth += 1
            elif char in _CLOSE:
                depth -= 1
                if depth == 0:
                    self.done = True
                    rest = text[i + 1 :]
                    if rest:
                        self.dropped.append(rest)
                    return text[: i + 1]
        self._depth, self._in_string, self._escape = depth, in_string, escape
        return text
