#!/usr/bin/env bash
# The interpreter the Makefile makes its venv with (make runs this once, when it reads the Makefile):
#   tools/python.sh                the newest of python3.13, python3.12, python3.11, python3 that works
#   tools/python.sh PYTHON         PYTHON itself, checked
#   tools/python.sh --version 3.13 python3.13 from PATH, else pyenv's installed 3.13 (make test-python)
# Prints "ok INTERPRETER" (its sys.executable), or the one line saying what is wrong and how to
# get a supported Python (exit 1). Candidates are run, not just looked up: pyenv puts a shim for
# every installed version on PATH, and a shim fails unless its version is selected.
set -u
SUPPORTED="Python 3.11, 3.12 or 3.13"
FIX="install one (Debian 13 ships 3.13, Ubuntu 24.04 3.12: sudo apt-get install python3 python3-venv) or pass PYTHON=/path/to/python3.x"

ok() {  # ok INTERPRETER: print "ok <its sys.executable>" when it runs and is 3.11-3.13
  local exe
  exe=$("$1" -c 'import sys; good = (3, 11) <= sys.version_info[:2] <= (3, 13); good and print(sys.executable); sys.exit(not good)' 2>/dev/null) \
    && [ -n "$exe" ] && echo "ok $exe"
}

fail() { echo "$*"; exit 1; }

if [ "${1:-}" = --version ]; then
  want=${2:-}
  [[ $want =~ ^3\.1[123]$ ]] || fail "make test-python needs PY=3.11, PY=3.12 or PY=3.13 (got '${want}')"
  ok "python$want" && exit 0
  if command -v pyenv >/dev/null; then
    for exe in $(ls -d "$(pyenv root)/versions/$want".*/bin/"python$want" 2>/dev/null | sort -V -r); do
      ok "$exe" && exit 0
    done
  fi
  fail "no working python$want on PATH or in pyenv: $FIX"
elif [ $# -gt 0 ] && [ -n "$1" ]; then
  ok "$1" && exit 0
  command -v "$1" >/dev/null || fail "PYTHON=$1 is not found; DataRailroad needs $SUPPORTED: $FIX"
  version=$("$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
    && fail "PYTHON=$1 is Python $version; DataRailroad needs $SUPPORTED: $FIX" \
    || fail "PYTHON=$1 does not run; DataRailroad needs $SUPPORTED: $FIX"
else
  for name in python3.13 python3.12 python3.11 python3; do
    ok "$name" && exit 0
  done
  fail "no $SUPPORTED found (tried python3.13, python3.12, python3.11, python3): $FIX"
fi
