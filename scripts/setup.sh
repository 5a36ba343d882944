#!/usr/bin/env bash
# Installs what hyperpipe needs to build and test, from Debian's packages.
# Idempotent: installs only what is missing; runs as root without prompts
# (uses sudo when not root).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libtorch-dev libgloo-dev            # LibTorch 1.13 with c10d; Gloo headers for ProcessGroupGloo.hpp
  # Debian's LibTorch is built with BLAS_INFO=generic: every matrix product calls
  # whatever libblas.so.3 the alternatives point at, and libtorch-dev's dependency
  # is met by libblas3, the netlib reference (5-8x slower steps). OpenBLAS's
  # OpenMP build, not its pthread one: LibTorch runs its own loops on OpenMP, so
  # the two share one pool sized by OMP_NUM_THREADS (the launcher's cores/nproc),
  # where a pthread OpenBLAS would start cores threads per rank and oversubscribe.
  libopenblas0-openmp
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libtomlplusplus-dev
  zlib1g-dev                          # crc32 of the checkpoint files
  libsentencepiece-dev                # tokenize, train --tokenizer-model, generate: SentencePiece
  python3-torch                       # the independent reader of exported weights in the tests (torch.load)
  librsvg2-bin                        # rsvg-convert: look at the SVG timelines as PNG
  bsdutils                            # script: tests run commands on a pseudo-terminal
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# Installing OpenBLAS registers it as an alternative, but an alternative in
# auto mode follows priorities (OpenBLAS's pthread build outranks the OpenMP
# one) and a manual choice sticks: point both at the OpenMP build unless the
# administrator chose another optimised BLAS by hand.
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for lib in blas lapack; do
  name="lib$lib.so.3-$arch"
  want="/usr/lib/$arch/openblas-openmp/lib$lib.so.3"
  now=$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Value: //p')
  mode=$(update-alternatives --query "$name" 2>/dev/null | sed -n 's/^Status: //p')
  [[ "$now" == "$want" ]] && continue
  if [[ "$mode" == manual && "$now" != "/usr/lib/$arch/$lib/lib$lib.so.3" ]]; then
    echo "setup: keeping lib$lib.so.3 -> $now (chosen by hand; hyperpipe expects $want)"
    continue
  fi
  echo "setup: pointing lib$lib.so.3 at OpenBLAS (OpenMP) instead of ${now:-nothing}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  $sudo update-alternatives --quiet --set "$name" "$want"
done
