"""The KV-tier fields as one pydantic type each, for every edge that takes them: the simulate
request (``servecap simulate``, ``POST /api/v1/simulate``), a fleet file's pool, the fleet flags
and the fleet planner's tier levers. The ranges, by meaning, and the help are
:mod:`servecap.core.kv_tier_settings`'s; a value outside one (0, negative, nan, 1e-300, 1e300)
is refused naming the field.

``CpuGib``, ``SsdGib``, ``RemoteTib`` are the sizes (a lever's); ``CpuKvGib``, ``SsdKvGib``,
``RemoteKvTib`` the optional tier settings (None: no such tier), described where they are."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from servecap.core.kv_tier_settings import (
    CPU_HELP,
    CPU_KV_GIB,
    LOAD_HELP,
    REMOTE_HELP,
    REMOTE_KV_TIB,
    SSD_HELP,
    SSD_KV_GIB,
    STORE_HELP,
    KvLoad,
    KvStore,
)

CpuGib = Annotated[float, Field(ge=CPU_KV_GIB[0], le=CPU_KV_GIB[1], allow_inf_nan=False)]
SsdGib = Annotated[float, Field(ge=SSD_KV_GIB[0], le=SSD_KV_GIB[1], allow_inf_nan=False)]
RemoteTib = Annotated[float, Field(ge=REMOTE_KV_TIB[0], le=REMOTE_KV_TIB[1], allow_inf_nan=False)]
CpuKvGib = Annotated[CpuGib | None, Field(description=CPU_HELP)]
SsdKvGib = Annotated[SsdGib | None, Field(description=SSD_HELP)]
RemoteKvTib = Annotated[RemoteTib | None, Field(description=REMOTE_HELP)]
KvLoadField = Annotated[KvLoad, Field(description=LOAD_HELP)]
KvStoreField = Annotated[KvStore, Field(description=STORE_HELP)]
