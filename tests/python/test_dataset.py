"""openlake_client.dataset against a real openlaked in storage mode: the map-style and the
iterable dataset over a prefix, sharding across ranks and DataLoader worker processes, epochs
shuffled alike on every rank, and errors that reach the training loop."""

import pytest

torch = pytest.importorskip("torch")

import openlake_client as ol  # noqa: E402
from openlake_client.dataset import ObjectDataset, ObjectStream, S3Config  # noqa: E402

N = 60


@pytest.fixture
def data(store):
    t = store.transfer(connections=4)
    t.create_bucket("train")
    objs = {f"shard/{i:04d}.bin": bytes([i % 251]) * (100 + 37 * i) for i in range(N)}
    t.put_many("train", list(objs.items()) + [("other/x", b"not in the prefix")])
    cfg = S3Config(store.endpoint, store.access_key, store.secret_key, connections=4)
    return cfg, objs


def test_map_style_items_in_key_order(data):
    cfg, objs = data
    ds = ObjectDataset("s3://train/shard/", cfg)
    assert len(ds) == N and ds.keys == sorted(objs)
    assert bytes(ds[5]) == objs["shard/0005.bin"]
    assert [bytes(b) for b in ds.get_batch([3, 1])] == [objs["shard/0003.bin"],
                                                         objs["shard/0001.bin"]]
    sized = ObjectDataset("s3://train/shard/", cfg, transform=lambda k, d: (k, len(d)))
    loader = torch.utils.data.DataLoader(sized, batch_size=None, num_workers=2)
    assert sorted(tuple(x) for x in loader) == sorted((k, len(v)) for k, v in objs.items())


def test_stream_shards_ranks_and_workers_and_shuffles_per_epoch(data):
    cfg, objs = data
    seen = []
    for rank in range(3):
        s = ObjectStream("s3://train/shard/", cfg, seed=11, batch=7, rank=rank, world_size=3)
        got = list(s)
        assert len(got) == len(s) == N // 3
        assert all(bytes(d) == objs[k] for k, d in got)
        seen += [k for k, _ in got]
    assert sorted(seen) == sorted(objs)  # every key once across the ranks

    s = ObjectStream("s3://train/shard/", cfg, seed=11, rank=0, world_size=1)
    first = [k for k, _ in s]
    assert [k for k, _ in s] == first  # same epoch, same order
    s.set_epoch(1)
    assert [k for k, _ in s] != first and sorted(k for k, _ in s) == sorted(first)
    unshuffled = ObjectStream("s3://train/shard/", cfg, shuffle=False, rank=0, world_size=1)
    assert [k for k, _ in unshuffled] == sorted(objs)

    # Two DataLoader worker processes split the rank's keys between them.
    s = ObjectStream("s3://train/shard/", cfg, seed=5, batch=4, prefetch=1,
                     transform=lambda k, d: k)
    loader = torch.utils.data.DataLoader(s, batch_size=None, num_workers=2)
    keys = list(loader)
    assert sorted(keys) == sorted(objs)


def test_a_consumer_that_stops_early_and_errors_that_reach_it(data, store):
    cfg, objs = data
    s = ObjectStream("s3://train/shard/", cfg, batch=2, prefetch=1, rank=0, world_size=1)
    it = iter(s)
    next(it)
    it.close()  # the prefetch thread ends instead of blocking on a full queue
    # An object listed at the start and deleted since: its batch's error reaches the loop.
    s = ObjectStream("s3://train/shard/", cfg, shuffle=False, batch=8, rank=0, world_size=1)
    store.transfer().delete("train", "shard/0030.bin")
    got = []
    with pytest.raises(ol.NotFoundError):
        for key, _ in s:
            got.append(key)
    assert got == sorted(objs)[:24]  # the batches before the one that failed
