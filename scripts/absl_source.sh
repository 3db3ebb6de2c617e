#!/usr/bin/env bash
# Unpacks Debian's abseil source package, the version of the installed
# libabsl-dev, under DIR (once) and prints its source directory, for
# -DGPUSCHED_TSAN=ON -DGPUSCHED_ABSL_SOURCE_DIR=...: Debian's libabsl is not
# built with ThreadSanitizer, which then cannot see absl::Mutex at all.
# Reads the deb-src twins of the system's Debian entries into apt lists of
# its own under DIR; the system's apt setup is not changed.
# Usage: scripts/absl_source.sh DIR
set -euo pipefail
dir="$(mkdir -p "$1" && cd "$1" && pwd)"
version="$(dpkg-query -W -f='${Version}' libabsl-dev)"
upstream="${version#*:}"
upstream="${upstream%%-*}"
src="$dir/abseil-$upstream"
if [ ! -f "$src/CMakeLists.txt" ]; then
  mkdir -p "$dir/apt/parts" "$dir/apt/lists/partial"
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
      >"$dir/apt/parts/debian-src.sources"
  else
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list >"$dir/apt/parts/debian-src.list"
  fi
  apt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$dir/apt/parts"
       -o Dir::State::Lists="$dir/apt/lists" -o APT::Sandbox::User=root)
  apt-get "${apt[@]}" update -qq >&2
  (cd "$dir" && apt-get "${apt[@]}" source -qq "abseil=$version" >&2)
fi
echo "$src"
