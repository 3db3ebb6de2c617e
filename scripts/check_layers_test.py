#!/usr/bin/env python3
"""scripts/check_layers.py catches what it is for, on a small tree.

The tree: gpusched_model (scheduler/model) and gpusched_high (scheduler/high,
links model), and a public header include/gpusched/util/plain.h. Each case
writes the tree, applies one change and expects check_layers.py to pass or
to fail naming the file:line and the libraries. Run by ctest
(layers_check_catches_violations); Python 3 standard library only.
"""
import os
import subprocess
import sys
import tempfile

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_layers.py")

BASE = {
    "scheduler/CMakeLists.txt": "add_subdirectory(model)\nadd_subdirectory(high)\n",
    "scheduler/model/CMakeLists.txt": "# the bottom\nadd_library(gpusched_model model.cc)\n",
    "scheduler/model/model.h": '#include "gpusched/util/plain.h"\n',
    "scheduler/model/values.h": "struct Values {};\n",  # header-only: owned by model
    "scheduler/model/model.cc": '#include "scheduler/model/model.h"\n',
    "scheduler/high/CMakeLists.txt": (
        "add_library(gpusched_high\n  high.cc)\n"
        "target_link_libraries(gpusched_high PUBLIC gpusched_model absl::strings)\n"),
    "scheduler/high/high.h": '#include "scheduler/model/values.h"\n',
    "scheduler/high/high.cc": '#include "scheduler/high/high.h"\n#include "scheduler/model/model.h"\n',
    "include/gpusched/util/plain.h": '#include "absl/strings/str_cat.h"\n',
}


def run(changes):
    with tempfile.TemporaryDirectory() as root:
        for path, text in {**BASE, **changes}.items():
            if text is None:
                continue
            os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
            with open(os.path.join(root, path), "w") as f:
                f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True, text=True)
        return p.returncode, p.stdout


CASES = [
    # (what, changes, expected exit code, text the output must contain)
    ("the tree as written", {}, 0, ""),
    ("a header of the lower library including the higher one's",
     {"scheduler/model/values.h": '#include "scheduler/high/high.h"\n'}, 1,
     "scheduler/model/values.h:1: gpusched_model includes scheduler/high/high.h of gpusched_high "
     "but does not link gpusched_high"),
    ("a source including a library it does not link",
     {"scheduler/high/CMakeLists.txt": "add_library(gpusched_high high.cc)\n"}, 1,
     "scheduler/high/high.cc:2: gpusched_high includes scheduler/model/model.h of gpusched_model"),
    ("a header-only header of a library not linked",
     {"scheduler/high/CMakeLists.txt": "add_library(gpusched_high high.cc)\n"}, 1,
     "scheduler/high/high.h:1: gpusched_high includes scheduler/model/values.h of gpusched_model"),
    ("a link cycle",
     {"scheduler/model/CMakeLists.txt":
      "add_library(gpusched_model model.cc)\ntarget_link_libraries(gpusched_model PRIVATE gpusched_high)\n"},
     1, "link cycle: gpusched_high -> gpusched_model -> gpusched_high"),
    ("a PRIVATE link does not pass on",
     {"scheduler/mid/CMakeLists.txt":
      "add_library(gpusched_mid mid.cc)\ntarget_link_libraries(gpusched_mid PRIVATE gpusched_model)\n",
      "scheduler/mid/mid.cc": "",
      "scheduler/CMakeLists.txt": "add_subdirectory(model)\nadd_subdirectory(mid)\n"
                                  "add_subdirectory(high)\n",
      "scheduler/high/CMakeLists.txt":
      "add_library(gpusched_high high.cc)\ntarget_link_libraries(gpusched_high gpusched_mid)\n"},
     1, "scheduler/high/high.cc:2: gpusched_high includes scheduler/model/model.h of gpusched_model"),
    ("a PUBLIC link passes on",
     {"scheduler/mid/CMakeLists.txt":
      "add_library(gpusched_mid mid.cc)\ntarget_link_libraries(gpusched_mid PUBLIC gpusched_model)\n",
      "scheduler/mid/mid.cc": "",
      "scheduler/high/CMakeLists.txt":
      "add_library(gpusched_high high.cc)\ntarget_link_libraries(gpusched_high gpusched_mid)\n"},
     0, ""),
    ("an include of a file that is not there",
     {"scheduler/model/model.cc": '#include "scheduler/model/gone.h"\n'}, 1,
     "scheduler/model/model.cc:1: includes scheduler/model/gone.h, which does not exist"),
    ("a source no target lists",
     {"scheduler/model/extra.cc": ""}, 1, "scheduler/model/extra.cc: no CMake target lists it"),
    ("a header listed as a source of another library in the folder",
     {"scheduler/model/CMakeLists.txt":
      "add_library(gpusched_model model.cc)\nadd_library(gpusched_values INTERFACE values.h)\n"}, 1,
     "scheduler/high/high.h:1: gpusched_high includes scheduler/model/values.h of gpusched_values"),
]


def main():
    failed = 0
    for what, changes, code, text in CASES:
        got, out = run(changes)
        if got != code or text not in out:
            failed += 1
            print(f"FAIL {what}: exit {got} (want {code}), output:\n{out}")
        else:
            print(f"ok   {what}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
