#!/bin/bash
# Builds gpucarry/: what the GPU checks need on a CUDA machine that has none of Debian's
# libraries (a lent GPU machine, say): openlaked, the Python module built for that machine's
# interpreter, the shared libraries they link (copied from this machine), the package's Python
# files, and gpu_checks.sh to run there:
#
#   tools/scripts/gpu_bundle.sh [PYTHON_INCLUDE_DIR]     # default: a pyenv 3.12's headers
#   (there)  bash gpucarry/gpu_checks.sh                  # results under $OUT (default ./gpu-out)
#
# The module is compiled by hand (Debian 12's meson cannot configure for Python >= 3.12) from
# the release build's static archive, with the link line of the regular build. Where nvcc is
# found (PATH, else $NVCC, else /usr/local/cuda/bin/nvcc) the GPU checksum (libopenlake/cuda/) is
# compiled for sm_90 plus compute_90 PTX and linked in with the CUDA runtime static
# (-DOL_HAVE_CUDA=1: openlake_client.has_cuda_crc() is then True); without nvcc the module is
# built without it, with a warning.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYINC=${1:-$(ls -d ~/.pyenv/versions/3.12*/include/python3.12 2>/dev/null | tail -1)}
[ -f "$PYINC/Python.h" ] || { echo "gpu_bundle: no Python.h under '$PYINC'" >&2; exit 2; }
TAG=$(basename "$PYINC" | sed 's/python3\./cpython-3/; s/$/-x86_64-linux-gnu/')
[ -d build-bench ] || meson setup build-bench -Dbuildtype=release >/dev/null
ninja -C build-bench libopenlake/libopenlake_objs.a tools/openlaked/openlaked >/dev/null
[ -f build/build.ninja ] || { echo "gpu_bundle: configure ./build first (make test)" >&2; exit 2; }
LINK=$(sed -n '/^build bindings\/python\/openlake_client\/_openlake\.cpython-[0-9]*-x86_64-linux-gnu\.so:/{n;p}' \
  build/build.ninja | sed 's/^ LINK_ARGS = //; s#libopenlake/libopenlake_objs.a#build-bench/libopenlake/libopenlake_objs.a#')
rm -rf gpucarry && mkdir -p gpucarry/py/openlake_client gpucarry/lib
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
CUDA_OBJ=() CUDA_LINK=() CUDA_DEF=()
if [ -x "$NVCC" ]; then
  CUDA_HOME=$(dirname "$(dirname "$(readlink -f "$NVCC")")")
  mkdir -p gpucarry/obj
  "$NVCC" -std=c++17 -O3 -gencode 'arch=compute_90,code=[sm_90,compute_90]' -Xcompiler -fPIC \
    -Ilibopenlake -c libopenlake/cuda/crc64_rows.cu -o gpucarry/obj/crc64_rows.o
  CUDA_OBJ=(gpucarry/obj/crc64_rows.o)
  CUDA_DEF=(-DOL_HAVE_CUDA=1 -Ilibopenlake/cuda -I"$CUDA_HOME/include")
  # -cudart static: the runtime goes into the module, the machine needs only the driver.
  CUDA_LINK=(-L"$CUDA_HOME/lib64" -L"$CUDA_HOME/targets/x86_64-linux/lib" -lcudart_static -ldl -lrt)
else
  echo "gpu_bundle: no nvcc at '$NVCC': the module is built without the GPU checksum" >&2
fi
g++ -std=c++20 -O2 -fPIC -shared -fvisibility=hidden -DNDEBUG \
  -D_FILE_OFFSET_BITS=64 -pthread -Ilibopenlake/include -I"$PYINC" \
  "${CUDA_DEF[@]}" bindings/python/openlake_client/_openlake.cc "${CUDA_OBJ[@]}" \
  -o "gpucarry/py/openlake_client/_openlake.$TAG.so" $LINK "${CUDA_LINK[@]}"
rm -rf gpucarry/obj
cp bindings/python/openlake_client/*.py gpucarry/py/openlake_client/
cp build-bench/tools/openlaked/openlaked gpucarry/
cp -L build-bench/libopenlake/libopenlake.so.0 gpucarry/lib/
(LD_LIBRARY_PATH=gpucarry/lib ldd gpucarry/openlaked; ldd gpucarry/py/openlake_client/_openlake*.so) |
  awk '/=>/ {print $3}' | sort -u |
  grep -v -E 'libc\.so|libm\.so|libstdc\+\+|libgcc_s|ld-linux|libpthread|libdl\.so|librt\.so|gpucarry' |
  while read -r lib; do cp -nL "$lib" gpucarry/lib/; done
cp tools/scripts/gpu_checks.sh gpucarry/
echo "gpu_bundle: gpucarry/ ($(du -sh gpucarry | cut -f1)) for $TAG"
