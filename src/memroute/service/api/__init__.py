"""The HTTP API's endpoints, one router per concept; :func:`memroute.service.app.create_app` includes them."""

from memroute.service.api import agents, memories, system, turns

ROUTERS = (system.router, memories.router, turns.router, agents.router)

__all__ = ["ROUTERS"]
