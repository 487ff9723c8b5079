"""flurry_client: the client of flurry, a distributed unique-ID service.

``Client`` (threads) and ``AsyncClient`` (asyncio) keep a prefetch buffer of snowflake IDs, hand
out segment numbers from ranges they hold, retry only where the server says it helps and decode
IDs locally. The contract is docs/clients.md of the flurry repository.
"""

from ._core import Decoded, DecodedOrder, FlurryError, FlurrySettingsError, Layout
from .aio import AsyncClient, AsyncSegment
from .client import Client, Segment

__all__ = ["Client", "Segment", "AsyncClient", "AsyncSegment", "Decoded", "DecodedOrder",
           "FlurryError", "FlurrySettingsError", "Layout"]
__version__ = "0.1.0"
