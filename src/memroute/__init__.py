"""memroute: conversation-aware routing and memory recall for assistants, in English, Japanese and Korean.

The public API lives here; everything else is an implementation module.
"""

from memroute.client import AsyncClient, Client
from memroute.config import Settings
from memroute.embed import Embedder, get_embedder
from memroute.errors import (
    AuthError,
    CatalogueError,
    ConfigError,
    DependencyError,
    EmbeddingError,
    InputError,
    MemrouteError,
    ModelMismatchError,
    NotFoundError,
    RateLimitError,
    SchemaVersionError,
    ServiceError,
    StoreError,
    StoreLockedError,
    StoreReadOnlyError,
)
from memroute.memory import AsyncMemory, ImportReport, Memory
from memroute.stores import Store, open_store
from memroute.text import detect_language, tokenize
from memroute.types import (
    Agent,
    AgentStatus,
    Hit,
    MemoryItem,
    MemoryKind,
    Message,
    SearchFilter,
    Sensitivity,
)

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentStatus",
    "AsyncClient",
    "AsyncMemory",
    "AuthError",
    "CatalogueError",
    "Client",
    "ConfigError",
    "DependencyError",
    "Embedder",
    "EmbeddingError",
    "Hit",
    "ImportReport",
    "InputError",
    "Memory",
    "MemoryItem",
    "MemoryKind",
    "MemrouteError",
    "Message",
    "ModelMismatchError",
    "NotFoundError",
    "RateLimitError",
    "SchemaVersionError",
    "SearchFilter",
    "Sensitivity",
    "ServiceError",
    "Settings",
    "Store",
    "StoreError",
    "StoreLockedError",
    "StoreReadOnlyError",
    "__version__",
    "detect_language",
    "get_embedder",
    "open_store",
    "tokenize",
]
