#!/bin/sh
# `pip install ./bindings/python` the way docs/vllm.md says, offline, into a fresh virtual
# environment that sees Debian's packages; then use what it installed, from outside the tree.
#   pip_install_check.sh PYTHON SOURCE_ROOT
set -eu
python="$1"
root="$2"
work="$(mktemp -d /var/tmp/openlake-pip-XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv --system-site-packages "$work/venv"
"$work/venv/bin/pip" install --no-build-isolation --no-index --quiet "$root/bindings/python"
cd "$work"
env -u PYTHONPATH "$work/venv/bin/python" - <<'PY'
import openlake_client, openlake_client.openlake_connector as c
assert "/venv/" in openlake_client.__file__, openlake_client.__file__
print("installed", openlake_client.__version__, c.OpenLakeConnector.__name__)
PY
"$work/venv/bin/openlaked" --version
# The entry point answers even with no daemon: it says so and exits 1.
if env -u PYTHONPATH "$work/venv/bin/python" -m openlake_client --address 127.0.0.1:1 --timeout 1; then
  echo "python -m openlake_client claimed a daemon at 127.0.0.1:1" >&2
  exit 1
fi
echo "pip install ./bindings/python: ok"
