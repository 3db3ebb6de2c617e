#!/usr/bin/env python3
"""Every product #include follows a CMake link line.

Each folder under scheduler/ (and policy/) is a CMake library, and a
library's link line is its dependency rule (docs/architecture.md, "Layers").
A header-only dependency (a library including another's header without
linking it) compiles, because every target sees the whole tree's include
roots, but it breaks that rule silently. This script finds them:

  1. It reads add_library / add_executable / target_sources /
     target_link_libraries from the product's CMakeLists.txt files and builds
     the link graph (a library reaches what it links, and what those link
     PUBLIC, transitively). A cycle in that graph is an error.
  2. It gives every product file (.cc and .h under scheduler/, policy/ and
     include/gpusched/) an owning library: a .cc the library that lists it;
     a header the library listing the .cc of the same name beside it (for
     include/gpusched/<dir>/, in the folder that implements <dir>); a
     header-only header the library with most sources in its folder (or the
     nearest parent folder). include/gpusched/util's header-only headers
     (abseil only) belong to gpusched_model, the bottom layer.
  3. For each #include "scheduler/...", "policy/..." or "gpusched/..." in a
     file, the including file's library must be the included file's owner
     or reach it.

  python3 scripts/check_layers.py [--root DIR]   exit 1 naming file:line and
                                                 both libraries per violation
  python3 scripts/check_layers.py --graph        print each library's links

Python 3 standard library only. The ctest test `layers_follow_link_lines`
runs it on the repository; `layers_check_catches_violations` runs it on a
small tree with known violations (scripts/check_layers_test.py).
"""
import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Folders holding product code (CMakeLists.txt and sources).
PRODUCT_DIRS = ("scheduler", "policy")
# Public headers: include/gpusched/<dir> is implemented in this folder.
PUBLIC_DIRS = {
    "model": "scheduler/model",
    "policy": "policy",
    "core": "scheduler/core",
    "util": None,  # implemented wherever its .cc is; header-only: the bottom
}
BOTTOM_LIBRARY = "gpusched_model"
SOURCE_EXT = (".cc", ".cpp")
HEADER_EXT = (".h", ".hpp")
SCOPES = {"PUBLIC", "PRIVATE", "INTERFACE"}
LIBRARY_KINDS = {"STATIC", "SHARED", "MODULE", "OBJECT", "INTERFACE", "EXCLUDE_FROM_ALL"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def cmake_commands(text):
    """Yields (command, args) of each command invocation in a CMake file."""
    text = re.sub(r"#[^\n]*", "", text)
    for m in re.finditer(r"\b([A-Za-z_]\w*)\s*\(", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        yield m.group(1).lower(), text[m.end():i - 1].split()


class Graph:
    """Targets, their sources and their links, from the CMake files."""

    def __init__(self, root):
        self.root = root
        self.sources = {}  # repo-relative source path -> target
        self.links = collections.defaultdict(dict)  # target -> {dep: scope}
        self.targets = []
        for top in PRODUCT_DIRS:
            for dirpath, _, files in sorted(os.walk(os.path.join(root, top))):
                if "CMakeLists.txt" in files:
                    self._read(os.path.join(dirpath, "CMakeLists.txt"))

    def _read(self, path):
        folder = os.path.relpath(os.path.dirname(path), self.root)
        with open(path) as f:
            text = f.read()
        for cmd, args in cmake_commands(text):
            if not args:
                continue
            name = args[0]
            if cmd in ("add_library", "add_executable"):
                if "ALIAS" in args or "IMPORTED" in args:
                    continue
                self.targets.append(name)
                self._add_sources(name, folder, args[1:])
            elif cmd == "target_sources":
                self._add_sources(name, folder, args[1:])
            elif cmd == "target_link_libraries":
                scope = "PUBLIC"
                for a in args[1:]:
                    if a in SCOPES:
                        scope = a
                    elif a not in self.links[name] or scope == "PUBLIC":
                        self.links[name][a] = scope

    def _add_sources(self, target, folder, args):
        for a in args:
            if a in LIBRARY_KINDS or a in SCOPES or "$" in a:
                continue
            if a.endswith(SOURCE_EXT + HEADER_EXT):
                self.sources[os.path.normpath(os.path.join(folder, a))] = target

    def deps(self, target):
        """Product targets `target` links directly."""
        return [d for d in self.links.get(target, {}) if d in self.targets]

    def reach(self, target):
        """Targets whose headers `target` may include: what it links, and
        what those link PUBLIC (or INTERFACE), transitively."""
        seen = set()
        frontier = list(self.deps(target))
        while frontier:
            t = frontier.pop()
            if t in seen:
                continue
            seen.add(t)
            frontier += [d for d, s in self.links.get(t, {}).items()
                     if d in self.targets and s != "PRIVATE"]
        return seen

    def cycles(self):
        """Each link cycle once, as a list of targets."""
        found, state = [], {}

        def visit(t, stack):
            state[t] = 1
            stack.append(t)
            for d in self.deps(t):
                if state.get(d) == 1:
                    found.append(stack[stack.index(d):] + [d])
                elif d not in state:
                    visit(d, stack)
            stack.pop()
            state[t] = 2

        for t in self.targets:
            if t not in state:
                visit(t, [])
        return found


def product_files(root):
    tops = list(PRODUCT_DIRS) + [os.path.join("include", "gpusched")]
    for top in tops:
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith(SOURCE_EXT + HEADER_EXT):
                    yield os.path.relpath(os.path.join(dirpath, f), root)


def folder_owner(graph, folder):
    """The library with most sources in `folder`, else in its nearest parent."""
    while folder and folder != ".":
        counts = collections.Counter(t for s, t in graph.sources.items()
                                     if os.path.dirname(s) == folder)
        if counts:
            return max(sorted(counts), key=lambda t: counts[t])
        folder = os.path.dirname(folder)
    return None


def owner(graph, path):
    """The library `path` (repo-relative) belongs to, or None."""
    if path in graph.sources:
        return graph.sources[path]
    folder, name = os.path.split(path)
    stem = os.path.splitext(name)[0]
    parts = path.split(os.sep)
    if parts[:2] == ["include", "gpusched"] and len(parts) >= 4:
        impl = PUBLIC_DIRS.get(parts[2])
        folders = [impl] if impl else None
    else:
        impl, folders = folder, [folder]
    for s, t in sorted(graph.sources.items()):
        d, n = os.path.split(s)
        if os.path.splitext(n)[0] == stem and n.endswith(SOURCE_EXT) and (
                folders is None or d in folders):
            return t
    if impl is None:
        return BOTTOM_LIBRARY
    return folder_owner(graph, impl)


def resolve(root, include):
    """The repo-relative product file an #include names, or None if it is
    not a product include."""
    top = include.split("/")[0]
    if top in PRODUCT_DIRS:
        return include
    if top == "gpusched":
        return os.path.join("include", include)
    return None


def check(root):
    graph = Graph(root)
    problems = []
    for cycle in graph.cycles():
        problems.append("link cycle: " + " -> ".join(cycle))
    owners = {}
    for f in product_files(root):
        owners[f] = owner(graph, f)
        if owners[f] is None:
            problems.append(f"{f}: in no library (no CMake target lists it or its folder)")
        elif f.endswith(SOURCE_EXT) and f not in graph.sources:
            problems.append(f"{f}: no CMake target lists it")
    reach = {t: graph.reach(t) for t in graph.targets}
    for f in sorted(owners):
        lib = owners[f]
        if lib is None:
            continue
        with open(os.path.join(root, f), errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = resolve(root, m.group(1))
                if target is None:
                    continue
                if not os.path.exists(os.path.join(root, target)):
                    problems.append(f"{f}:{lineno}: includes {m.group(1)}, which does not exist")
                    continue
                dep = owners.get(target) or owner(graph, target)
                if dep and dep != lib and dep not in reach.get(lib, ()):
                    problems.append(
                        f"{f}:{lineno}: {lib} includes {m.group(1)} of {dep} but does not link {dep}")
    return graph, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=ROOT, help="repository root (default: this script's)")
    ap.add_argument("--graph", action="store_true", help="print each target's direct links")
    args = ap.parse_args()
    graph, problems = check(args.root)
    if args.graph:
        for t in graph.targets:
            print(f"{t}: {' '.join(graph.deps(t))}")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} layering problem(s); a library may include only what it links "
              "(docs/architecture.md, \"Layers\")", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
