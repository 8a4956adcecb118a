"""A stdio MCP server for Codex tests, built with the ``mcp`` package: one tool, ``harbour_note``.

Codex starts it itself (``[mcp_servers.notes]`` in the test's CODEX_HOME) and reaches it through its
``tool_search`` (tests/clients/test_codex_cli.py).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool(description="Look up the harbour master's note for a port by its name.")
def harbour_note(port: str) -> str:
    return f"note for {port}: tides at dawn"


if __name__ == "__main__":
    server.run()
