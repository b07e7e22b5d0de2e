#!/bin/sh
# The C ABI of libopenlake.so: its soname, and the functions exported under the symbol version
# OPENLAKE_1 are exactly the committed list (openlake_c.symbols) and exactly the functions the
# header declares. A change to the C ABI must change all three on purpose.
#   abi_check.sh LIBOPENLAKE_SO SYMBOLS HEADER
set -eu
lib=$1
symbols=$2
header=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
soname=$(objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
if [ "$soname" != "libopenlake.so.1" ]; then
  echo "SONAME is '$soname', want libopenlake.so.1"; exit 1
fi
# Defined functions (not *UND*) of version OPENLAKE_1.
objdump -T "$lib" | awk 'NF > 2 && !/\*UND\*/ && $(NF-1) == "OPENLAKE_1" && $NF != "OPENLAKE_1" { print $NF }' | sort -u \
  > "$dir/exported"
grep -v '^#' "$symbols" | sed '/^$/d' | sort -u > "$dir/committed"
tr '\n' ' ' < "$header" | grep -o 'OPENLAKE_API [^;]*(' | grep -o 'openlake_[a-z0-9_]*($' \
  | tr -d '(' | sort -u > "$dir/declared"
status=0
if ! diff -u "$dir/committed" "$dir/exported" > "$dir/d1"; then
  echo "exported OPENLAKE_1 functions differ from $symbols:"; cat "$dir/d1"; status=1
fi
if ! diff -u "$dir/committed" "$dir/declared" > "$dir/d2"; then
  echo "functions declared in $header differ from $symbols:"; cat "$dir/d2"; status=1
fi
# No C function of the API escapes under another version.
stray=$(objdump -T "$lib" | awk 'NF > 2 && !/\*UND\*/ && $NF ~ /^openlake_/ && $(NF-1) != "OPENLAKE_1" { print $NF }')
if [ -n "$stray" ]; then
  echo "openlake_* symbols outside OPENLAKE_1: $stray"; status=1
fi
[ $status -eq 0 ] && echo "C ABI: $(wc -l < "$dir/exported") functions of OPENLAKE_1, soname $soname"
exit $status
