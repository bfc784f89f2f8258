#!/usr/bin/env bash
# Installs everything tether and its tests need on a fresh machine (Debian + Python 3.11):
# the package with its dev extras (with them ipykernel, Deno for the JavaScript kernel, pandas
# and matplotlib for the kernels' outputs), and the real language servers the tests start.
# Idempotent: each step is skipped when its component is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v clangd >/dev/null || need_apt+=(clangd)
command -v go >/dev/null || need_apt+=(golang-go)
command -v gopls >/dev/null || need_apt+=(gopls)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "install: apt ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v typescript-language-server >/dev/null || ! tsc --version 2>/dev/null | grep -q 'Version 5\.'; then
  echo "install: npm typescript-language-server typescript@5"
  npm install -g --no-fund --no-audit typescript-language-server 'typescript@5' >/dev/null
fi

echo "install: pip -e .[dev]"
python3 -m pip install -q --disable-pip-version-check -e '.[dev]'
