"""memroute as an MCP server (the ``mcp`` package, 2.x): memory tools and guided code investigation.

    >>> from memroute import Memory
    >>> from memroute.mcp import create_mcp_server, single_owner
    >>> server = create_mcp_server(Memory.open("sqlite:///m.db"), agents, single_owner("alice"))  # doctest: +SKIP
    >>> server.run("stdio")  # doctest: +SKIP

Tools: ``remember``, ``recall``, ``route``, ``analyze``, ``forget``; with repositories, the investigation
session tools of seed 002 and the code-intelligence tools (:mod:`memroute.mcp.investigate_tools`). Every
call acts for one owner, chosen by the server's :data:`OwnerScope`, exactly as the library scopes reads.
"""

from memroute.mcp.server import OwnerScope, create_mcp_server, mcp_http_app, single_owner

__all__ = ["OwnerScope", "create_mcp_server", "mcp_http_app", "single_owner"]
