#!/usr/bin/env bash
# The Python client installs on Debian 12 offline, with exactly the command of
# clients/python/README.md and docs/clients.md:
#   python3 -m venv --system-site-packages VENV
#   VENV/bin/pip install --no-index --no-build-isolation ./clients/python
# (Debian's setuptools and wheel build it: pip's default build isolation would fetch setuptools
# from PyPI, and a system-wide `pip install` is refused as an externally managed environment).
# Run on a copy of clients/python (pip builds in the tree it is given), with no pip configuration
# and, when this user may make one, in a network namespace of its own (no network at all); then
# the installed package is imported from the venv, not from the source tree.
# Usage: install_check.sh PYTHON3 SOURCE_DIR
set -euo pipefail

python=$1 src=$(realpath "$2")
work=$(mktemp -d "${TMPDIR:-/tmp}/flurry-pyinstall.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work/tree/clients"
cp -r "$src/clients/python" "$work/tree/clients/python"
rm -rf "$work/tree/clients/python/build" "$work/tree/clients/python/src/"*.egg-info
# Only what a fresh Debian machine has: no pip configuration, no PIP_* variable, no PYTHONPATH.
clean_env=(env -i "PATH=/usr/sbin:/usr/bin:/sbin:/bin" "HOME=$work/home" "LC_ALL=C.UTF-8"
           "PIP_CONFIG_FILE=/dev/null")
offline=()
if unshare --net true 2>/dev/null; then
  offline=(unshare --net)  # no interface but a down loopback: any download fails
  echo "offline: a network namespace of its own"
else
  echo "offline: --no-index only (this user cannot make a network namespace)"
fi

cd "$work/tree"
"${clean_env[@]}" "$python" -m venv --system-site-packages venv >"$work/venv.log" 2>&1 ||
  { cat "$work/venv.log" >&2; fail "python3 -m venv --system-site-packages (python3-venv installed?)"; }
if ! "${offline[@]}" "${clean_env[@]}" venv/bin/pip install --no-index --no-build-isolation \
  ./clients/python >"$work/pip.log" 2>&1; then
  cat "$work/pip.log" >&2
  fail "pip install --no-index --no-build-isolation ./clients/python"
fi
grep -q '^Successfully installed flurry-client-' "$work/pip.log" ||
  { cat "$work/pip.log" >&2; fail "pip did not say it installed flurry-client"; }

# Imported from the venv's site-packages, from another directory (not the source tree).
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$src/clients/python/pyproject.toml")
[[ -n $version ]] || fail "no version in clients/python/pyproject.toml"
cd "$work"
out=$("${clean_env[@]}" "$work/tree/venv/bin/python" -c '
import importlib.metadata, os, sys
import flurry_client
print(os.path.realpath(flurry_client.__file__))
print(importlib.metadata.version("flurry-client"))
print(hasattr(flurry_client, "Client"), hasattr(flurry_client, "AsyncClient"))
print(os.path.exists(os.path.join(os.path.dirname(flurry_client.__file__), "py.typed")))
') || fail "the installed client does not import"
echo "$out"
site=$(realpath "$work/tree/venv")/lib/
[[ $(sed -n 1p <<<"$out") == "$site"python3*/site-packages/flurry_client/__init__.py ]] ||
  fail "flurry_client imported from $(sed -n 1p <<<"$out"), not the venv's site-packages"
[[ $(sed -n 2p <<<"$out") == "$version" ]] || fail "installed version $(sed -n 2p <<<"$out"), not $version"
[[ $(sed -n 3p <<<"$out") == "True True" ]] || fail "flurry_client has no Client or AsyncClient"
[[ $(sed -n 4p <<<"$out") == "True" ]] || fail "py.typed is not installed"
echo "install_check: flurry-client $version installed offline into a venv and imported"
