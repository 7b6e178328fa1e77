"""A small MCP server for the code-action tests (the SDK's MCPServer, FastMCP before SDK 2): notes to
search (read-only) and to delete (destructive, so tether asks a person). Deletions go to ORACLE."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("notes", log_level="WARNING")
NOTES = {f"n{i}": f"note {i}: " + ("invoice overdue" if i % 3 == 0 else "all fine") for i in range(30)}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def search_notes(query: str) -> dict[str, list[str]]:
    """The ids of the notes whose text contains ``query``."""
    return {"ids": [k for k, v in NOTES.items() if query in v]}


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def read_note(note_id: str) -> str:
    """One note's text."""
    return NOTES[note_id]


@server.tool(annotations=ToolAnnotations(destructiveHint=True))
def delete_note(note_id: str) -> str:
    """Delete a note for good."""
    with open(os.environ["ORACLE"], "a") as f:
        f.write(json.dumps({"tool": "delete_note", "args": {"note_id": note_id}}) + "\n")
    return f"deleted {note_id}"


if __name__ == "__main__":
    server.run()
