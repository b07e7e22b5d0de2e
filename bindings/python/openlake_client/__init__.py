"""OpenLake KV-cache pool client, the vLLM KV connector, and parallel S3 transfers.

    import openlake_client as ol
    c = ol.Client("127.0.0.1:9400")          # moves to the local Unix socket, maps the slab
    ns = c.open_namespace("llama-8b/tp0", {"model": "meta-llama/Llama-3.1-8B",
                                           "dtype": "bfloat16"}, block_bytes)
    stored = c.put(ns, [key], [[(address, length), ...]])
    loaded, states = c.get(ns, [key], [[(address, length), ...]])

The vLLM connector is `openlake_client.openlake_connector.OpenLakeConnector` (see docs/vllm.md).
`S3Transfer` moves objects to and from an S3 endpoint (an openlaked's, or any path-style one)
over several connections at once, straight from and into buffers (docs/checkpoints.md):

    t = ol.S3Transfer("127.0.0.1:9000", access_key, secret_key)
    t.put_many("ckpt", [("step-100/0.bin", tensor_bytes), ...])
    t.get_many("ckpt", [("step-100/0.bin", 0, preallocated_buffer), ...])
Importing this package starts nothing: no thread, socket or daemon until a Client is made.
"""

from openlake_client._openlake import (  # noqa: F401  (re-exported)
    Client,
    DataLossError,
    DeadlineExceededError,
    InvalidArgumentError,
    Namespace,
    NotFoundError,
    OpenLakeError,
    PermissionDeniedError,
    PoolFullError,
    PreconditionError,
    S3Transfer,
    UnavailableError,
    crc64,
    crc64_at,
    crc64_many,
    node_status,
    version,
)

from openlake_client import _openlake

# The GPU checksum (crc64_rows_device) exists only in a module built with -Dcuda=enabled (or by
# tools/scripts/gpu_bundle.sh); has_cuda_crc() says whether this one has it.
has_cuda_crc = getattr(_openlake, "has_cuda_crc", lambda: False)
if has_cuda_crc():
    crc64_rows_device = _openlake.crc64_rows_device

__version__ = version()

# States returned by Client.get, per key.
LOADED = 0
MISSING = 1
CORRUPT = 2

__all__ = [
    "Client",
    "Namespace",
    "OpenLakeError",
    "NotFoundError",
    "UnavailableError",
    "DeadlineExceededError",
    "PoolFullError",
    "PreconditionError",
    "InvalidArgumentError",
    "PermissionDeniedError",
    "DataLossError",
    "S3Transfer",
    "crc64",
    "crc64_at",
    "crc64_many",
    "node_status",
    "has_cuda_crc",
    "version",
    "LOADED",
    "MISSING",
    "CORRUPT",
]
