#!/usr/bin/env python3
"""scripts/check_function_length.py measures what it is for, on small files.

Each case is one C++ file under scheduler/ of an empty tree, with the
functions it must find as (first line, last line, name); then the check
itself must fail on a function of 81 lines and pass on one of 80. Run by
ctest (function_length_check_measures); Python 3 standard library only.
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_function_length as cfl  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_function_length.py")


def body(n):
    """A function of exactly `n` lines (n >= 2)."""
    return "int Long(int x) {\n" + "  x += 1;\n" * (n - 2) + "}\n"


CASES = [
    ("free functions in a namespace, comments and strings with braces",
     'namespace a {\n'            # 1
     '// } not a brace {\n'       # 2
     'int F() {\n'                # 3
     '  const char* s = "}{";\n'  # 4
     "  char c = '}';\n"          # 5
     '  /* { */ return 1;\n'      # 6
     '}\n'                        # 7
     '}  // namespace a\n',       # 8
     [(3, 7, "F")]),
    ("a raw string and a preprocessor line",
     '#define X {\n'
     'std::string G() {\n'
     '  return R"(}}})";\n'
     '}\n',
     [(2, 4, "G")]),
    ("a method defined in a class body, after an access label",
     'class C {\n'
     ' public:\n'
     '  int M(int x) const {\n'
     '    if (x) {\n'
     '      return 1;\n'
     '    }\n'
     '    return 0;\n'
     '  }\n'
     '\n'
     ' private:\n'
     '  int y_{0};\n'
     '};\n',
     [(3, 8, "M")]),
    ("a constructor with a lambda and a brace initializer in its list",
     'Q::Q(int every)\n'
     '    : a_{1},\n'
     '      t_([this, every] {\n'
     '        while (true) {\n'
     '        }\n'
     '      }) {\n'
     '  Start();\n'
     '}\n',
     [(1, 8, "Q::Q")]),
    ("a template, an operator and a multi-line signature",
     'template <typename T>\n'
     'T Twice(T x) {\n'
     '  return x + x;\n'
     '}\n'
     'bool Key::operator<(const Key& o) const { return v < o.v; }\n'
     'absl::StatusOr<int> Out(int a,\n'
     '                        int b) {\n'
     '  return a + b;\n'
     '}\n',
     [(1, 4, "Twice"), (5, 5, "Key::operator<"), (6, 9, "Out")]),
    ("initializers at namespace scope are not functions",
     'const std::vector<int> kV = {1, 2};\n'
     'Table t{F(1), {2}};\n'
     'void H() {}\n',
     [(3, 3, "H")]),
]


def check_tree(text):
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "scheduler", "x"))
        with open(os.path.join(root, "scheduler", "x", "long.cc"), "w") as f:
            f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, "--root", root], capture_output=True,
                           text=True)
        return p.returncode, p.stdout


def main():
    failed = 0
    for what, text, want in CASES:
        got = list(cfl.functions(text))
        if got != want:
            failed += 1
            print(f"FAIL {what}: found {got}, want {want}")
        else:
            print(f"ok   {what}")
    for n, code, text in [(80, 0, ""),
                          (81, 1, "scheduler/x/long.cc:1: Long is 81 lines (at most 80)")]:
        got, out = check_tree(body(n))
        if got != code or text not in out:
            failed += 1
            print(f"FAIL a function of {n} lines: exit {got} (want {code}), output:\n{out}")
        else:
            print(f"ok   a function of {n} lines: exit {got}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
