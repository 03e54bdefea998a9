"""loganalyze for coding agents: the MCP server's tools and the skill file shipped with them.

`agent_tools` holds the tools as plain functions (validated inputs, bounded and redacted
JSON-ready results); `mcp_server` serves them over stdio with the `mcp` SDK (the optional
`[mcp]` extra, imported only by `loganalyze mcp`). See docs/agents.md.
"""
