"""`python -m openlake_client`: print the version and check that a daemon answers.

    python -m openlake_client                    # checks 127.0.0.1:9400
    python -m openlake_client --address unix:/run/openlake/kv-9400.sock
Exit status 0 when the daemon answered, 1 when it did not.
"""

import argparse
import sys

import openlake_client


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m openlake_client", description=__doc__.splitlines()[0])
    p.add_argument("--address", default="127.0.0.1:9400", help="openlaked's address (default %(default)s)")
    p.add_argument("--secret", default="", help="shared secret, for a daemon beyond loopback")
    p.add_argument("--timeout", type=float, default=3.0, help="seconds (default %(default)s)")
    args = p.parse_args(argv)
    print(f"openlake-vllm {openlake_client.__version__}")
    try:
        c = openlake_client.Client(args.address, secret=args.secret, timeout=args.timeout,
                                   connect_timeout=args.timeout)
        s = c.stats()
    except openlake_client.OpenLakeError as e:
        print(f"openlaked at {args.address}: not answering ({e})", file=sys.stderr)
        return 1
    gib = s["capacity_bytes"] / (1 << 30)
    print(f"openlaked {c.server_version} at {args.address}: up; slab {gib:.1f} GiB "
          f"({'mapped' if c.has_slab else 'not mapped: remote'}), {s['committed_blocks']} blocks, "
          f"{s['namespaces']} namespaces")
    c.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
