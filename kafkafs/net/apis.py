"""ApiVersions (api 18): the versions this node answers (Kafka ``ApiVersionsRequest``).

A version the node does not know is answered at version 0 with UNSUPPORTED_VERSION and the
ApiVersions versions alone, so the client retries with one it shares (KIP-511); a request
whose ClientSoftwareName or ClientSoftwareVersion is not valid (``[a-zA-Z0-9](?:[a-zA-Z0-9\\-.]*
[a-zA-Z0-9])?``) gets INVALID_REQUEST. No features are finalized (a single node without
KRaft's feature levels), so ``SupportedFeatures`` and ``FinalizedFeatures`` are empty and the
epoch is -1.
"""

from __future__ import annotations

import re

from . import errors as K

_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?\Z")


def _keys(supported) -> list[dict]:
    return [{"apiKey": k, "minVersion": lo, "maxVersion": hi}
            for k, (lo, hi) in sorted(supported.items())]


async def api_versions(broker, request, conn) -> dict:
    """``KafkaApis.handleApiVersionsRequest``: the ApiVersions response body."""
    if request.body is None:  # a version this node does not answer
        lo, hi = broker.supported[18]
        request.api_version = 0
        return {"errorCode": K.UNSUPPORTED_VERSION,
                "apiKeys": [{"apiKey": 18, "minVersion": lo, "maxVersion": hi}]}
    body = request.body
    if request.api_version >= 3:
        name, version = body["clientSoftwareName"], body["clientSoftwareVersion"]
        if not (_SOFTWARE.match(name) and _SOFTWARE.match(version)):
            return {"errorCode": K.INVALID_REQUEST, "apiKeys": []}
        conn.client_software = (name, version)
    return {"errorCode": K.NONE, "apiKeys": _keys(broker.supported), "throttleTimeMs": 0}


HANDLERS = {18: api_versions}
