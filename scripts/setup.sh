#!/usr/bin/env bash
# Installs what hyperpipe needs to build and test, from Debian's packages.
# Idempotent: installs only what is missing; runs as root without prompts
# (uses sudo when not root).
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libtorch-dev libgloo-dev            # LibTorch 1.13 with c10d; Gloo headers for ProcessGroupGloo.hpp
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
