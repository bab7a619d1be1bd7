#!/usr/bin/env bash
# Install the browser the page tests drive (tests/browser.py): Debian's Chromium, where none is found.
#
# Idempotent: a Chromium already on PATH (or named by NORMLAB_CHROMIUM) is kept and nothing is installed.
# Run by `make test`; as root (CI) or with sudo it installs the `chromium` package, anywhere else it says
# so and exits 0: the browser tests then skip, naming what is missing. Playwright for Python comes with
# the dev extra and drives this browser; its own `playwright install` (a download from its CDN) is not used.
set -euo pipefail

NAMES=(chromium chromium-browser google-chrome-stable google-chrome chrome)

if [[ -n "${NORMLAB_CHROMIUM:-}" && -x "${NORMLAB_CHROMIUM}" ]]; then
  echo "install_browser: using NORMLAB_CHROMIUM=$NORMLAB_CHROMIUM"
  exit 0
fi
for name in "${NAMES[@]}"; do
  if command -v "$name" >/dev/null 2>&1; then
    echo "install_browser: $(command -v "$name") is installed"
    exit 0
  fi
done

as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo "$@"
  else
    return 1
  fi
}

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install_browser: no Chromium and no apt-get: the browser tests will skip (set NORMLAB_CHROMIUM)"
  exit 0
fi
install() { as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
echo "install_browser: installing Debian's chromium for the browser tests"
# A stale or empty package index: refresh once and retry.
if install || { as_root apt-get update -qq && install; }; then
  echo "install_browser: installed $(command -v chromium)"
else
  echo "install_browser: could not install chromium (not root, or no package): the browser tests will skip"
fi
