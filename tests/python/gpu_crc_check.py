#!/usr/bin/env python3
"""The GPU checksum against the host's: openlake_client.crc64_rows_device (the CUDA kernel a save
uses when the KV cache is on a GPU) must give, for every row, what openlake_client.crc64_at
(ISA-L's CRC-64/XZ) gives. Rows of 1, 4095, 4096, 2 MiB and 2 MiB + 3 bytes, rows that start
off an 8-byte boundary, 64 rows of 2 MiB; then 1 GiB (512 rows of 2 MiB) timed, in GB/s.

    python3 tests/python/gpu_crc_check.py      # PASS / FAIL lines; exit 0, 1 on a mismatch,
                                               # 77 without CUDA or without the GPU checksum

Not collected by pytest (run by tools/scripts/gpu_checks.sh, stage `crc`): it needs a GPU.
"""

import sys
import time

MASK = (1 << 64) - 1
MIB2 = 2 << 20


def gpu_crcs(ol, torch, rows_t, row_bytes, rows, stream, base_offset=0):
    out = torch.empty(rows, dtype=torch.int64, device=rows_t.device)
    ol.crc64_rows_device(rows_t.data_ptr() + base_offset, row_bytes, rows, out.data_ptr(),
                         stream.cuda_stream)
    stream.synchronize()
    return [c & MASK for c in out.cpu().tolist()]


def host_crcs(ol, host, row_bytes, rows, base_offset=0):
    base = host.data_ptr() + base_offset
    return [int(c) for c in ol.crc64_many([(base + i * row_bytes, row_bytes)
                                           for i in range(rows)], 8)]


def main() -> int:
    import torch

    import openlake_client as ol

    if not torch.cuda.is_available():
        print("crc: no CUDA device visible: skipped")
        return 77
    if not ol.has_cuda_crc():
        print("crc: this openlake_client module was built without the GPU checksum: skipped")
        return 77
    dev = torch.device("cuda")
    stream = torch.cuda.Stream(dev)
    failures = 0

    def check(name, got, want):
        nonlocal failures
        ok = got == want
        failures += not ok
        bad = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        print(f"crc {name}: {'PASS' if ok else 'FAIL'}"
              + ("" if ok else f" (first bad row {bad}: {got[bad]:#x} != {want[bad]:#x})"),
              flush=True)

    check_value = torch.tensor(list(b"123456789"), dtype=torch.uint8)
    check("check value 123456789",
          gpu_crcs(ol, torch, check_value.to(dev), 9, 1, stream), [0x995DC9BBDF1939FA])
    g = torch.Generator().manual_seed(7)
    for row_bytes, rows, offset in [(1, 1, 0), (4095, 1, 0), (4096, 1, 0), (MIB2, 1, 0),
                                    (MIB2 + 3, 1, 0), (7, 5, 0), (4097, 3, 0), (4095, 4, 3),
                                    (MIB2 + 3, 2, 5), (MIB2, 64, 0)]:
        host = torch.randint(0, 256, (rows * row_bytes + offset,), dtype=torch.uint8, generator=g)
        got = gpu_crcs(ol, torch, host.to(dev), row_bytes, rows, stream, offset)
        check(f"{rows} x {row_bytes} B" + (f" at +{offset}" if offset else ""), got,
              host_crcs(ol, host, row_bytes, rows, offset))

    # 1 GiB: 512 rows of 2 MiB (a step of 512 KV blocks of 2 MiB).
    rows = 512
    data = torch.randint(0, 256, (rows * MIB2,), dtype=torch.uint8, generator=g)
    data_dev = data.to(dev)
    want = host_crcs(ol, data, MIB2, rows)
    check("512 x 2 MiB", gpu_crcs(ol, torch, data_dev, MIB2, rows, stream), want)
    out = torch.empty(rows, dtype=torch.int64, device=dev)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    reps = 20
    with torch.cuda.stream(stream):
        begin.record(stream)
        for _ in range(reps):
            ol.crc64_rows_device(data_dev.data_ptr(), MIB2, rows, out.data_ptr(),
                                 stream.cuda_stream)
        end.record(stream)
    end.synchronize()
    s = begin.elapsed_time(end) / 1e3 / reps
    t = time.perf_counter()
    host_crcs(ol, data, MIB2, rows)
    host_s = time.perf_counter() - t
    print(f"crc 1 GiB on the GPU: {s * 1e3:.2f} ms, {rows * MIB2 / s / 1e9:.1f} GB/s "
          f"(host, 8 threads: {host_s * 1e3:.1f} ms)", flush=True)
    print(f"crc: {'PASS' if failures == 0 else f'FAIL ({failures} checks)'}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
