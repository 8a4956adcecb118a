"""The custom (freeform) tools agent clients send, for the tests: Codex's ``apply_patch`` (a Lark grammar)
and a ticket id tool (a regular expression)."""

from __future__ import annotations

PATCH_LARK = """
start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
%import common.LF
"""
APPLY_PATCH = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edit files with a patch.",
    "format": {"type": "grammar", "syntax": "lark", "definition": PATCH_LARK},
}
TICKET = {
    "type": "custom",
    "name": "ticket",
    "description": "Open a ticket.",
    "format": {"type": "grammar", "syntax": "regex", "definition": r"[A-Z]{3}-\d{2,4}"},
}
