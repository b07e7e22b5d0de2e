#!/usr/bin/env python3
"""The layering check itself, on a small made-up tree: each kind of violation is found, and a
tree that keeps the rules passes."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import layering_check  # noqa: E402

GOOD = {
    "libopenlake/meson.build": "subdir('common')\nsubdir('io')\nsubdir('net')\nsubdir('kv')\n",
    "libopenlake/common/strings.cc": '#include "openlake/strings.h"\n#include "config.h"\n',
    "libopenlake/io/reactor.cc": '#include "io/reactor_impl.h"\n#include "openlake/log.h"\n',
    "libopenlake/kv/pool.cc": '#include "net/frame.h"\n#include "kv/kv.pb.h"\n#include "absl/x.h"\n',
    "libopenlake/include/openlake/kv/client.h": '#include "openlake/io/reactor.h"\n',
    "tools/openlaked/main.cc": '#include "openlake/kv/service.h"\n#include "daemon_config.h"\n',
}
BAD = {
    # a lower layer reaching up
    "io includes kv": {"libopenlake/io/x.cc": '#include "kv/pool.h"\n'},
    # a sibling it does not use
    "kv includes store": {"libopenlake/kv/x.cc": '#include "openlake/store/store.h"\n'},
    # a public header exposing a private one
    "public includes private": {"libopenlake/include/openlake/kv/x.h": '#include "kv/pool.h"\n'},
    # a consumer past the public headers
    "tool includes private": {"tools/openlake/x.cc": '#include "store/engine.h"\n'},
    # a folder nobody declared
    "unknown subsystem": {"libopenlake/gossip/x.cc": '#include "openlake/io/reactor.h"\n'},
    # meson order
    "meson order": {"libopenlake/meson.build": "subdir('common')\nsubdir('kv')\nsubdir('io')\nsubdir('net')\n"},
}


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            p = os.path.join(root, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "w") as f:
                f.write(text)
        return layering_check.check(root)


def main():
    failed = 0
    got = run(GOOD)
    if got:
        print("FAIL: a good tree was flagged:", got)
        failed += 1
    for name, extra in BAD.items():
        got = run({**GOOD, **extra})
        if not got:
            print(f"FAIL: not flagged: {name}")
            failed += 1
    print(f"layering_check_test: {1 + len(BAD) - failed} of {1 + len(BAD)} cases right")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
