#!/usr/bin/env python3
"""No product function is longer than 80 lines.

Reads every .cc file under scheduler/ and policy/ and measures each function
defined at namespace or class scope (free functions, member functions
defined out of line or inside a class body, constructors): from the first
line of its signature to its closing brace, comments and blank lines
included. Lambdas and local classes count toward the function that holds
them. Comments, string and character literals (raw strings included) and
preprocessor lines are blanked out before the braces are read.

  python3 scripts/check_function_length.py [--root DIR] [--max 80] [--all]

Exit 1 naming file:line: function and its length for each function over the
limit; --all prints every function's length.
Python 3 standard library only. The ctest test `functions_at_most_80_lines`
runs it on the repository; `function_length_check_measures` runs it on small
files with known lengths (scripts/check_function_length_test.py).
"""
import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRODUCT_DIRS = ("scheduler", "policy")
MAX_LINES = 80

_LITERAL = re.compile(
    r'//[^\n]*'                              # line comment
    r'|/\*.*?\*/'                            # block comment
    r'|R"(?P<d>[^()\\ ]{0,16})\(.*?\)(?P=d)"'  # raw string
    r'|"(?:\\.|[^"\\\n])*"'                  # string
    r"|'(?:\\.|[^'\\\n])*'",                 # character
    re.S)
_PREPROCESSOR = re.compile(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', re.M)
_ACCESS = re.compile(r'\s*(?:public|private|protected)\s*:(?!:)')
_TEMPLATE = re.compile(r'\s*template\s*<')
_CLASS = re.compile(r'(?:typedef\s+)?(?:class|struct|union|enum)\b')
_OPERATOR = re.compile(r'((?:[A-Za-z_]\w*::)*operator\s*(?:\(\s*\)|[^\s(]+))\s*\(')
_NAME = re.compile(r'((?:[A-Za-z_]\w*(?:<[^()]*?>)?::)*~?(?:operator\s*[^\s(]+|[A-Za-z_]\w*))\s*$')


def blank(text):
    """`text` with comments, literals and preprocessor lines replaced by
    spaces (newlines kept, so offsets and line numbers stay)."""
    keep = lambda m: re.sub(r'[^\n]', ' ', m.group(0))
    text = _LITERAL.sub(lambda m: keep(m) if m.group(0)[0] in '/R' else
                        m.group(0)[0] + keep(m)[1:-1] + m.group(0)[-1], text)
    return _PREPROCESSOR.sub(keep, text)


def skip_template(head):
    """`head` without a leading template<...> parameter list."""
    m = _TEMPLATE.match(head)
    if not m:
        return head
    depth, i = 1, m.end()
    while i < len(head) and depth:
        depth += {'<': 1, '>': -1}.get(head[i], 0)
        i += 1
    return skip_template(head[i:])


def top_level(head):
    """`head` with everything inside (), [] and <> (after a name) removed."""
    out, depth = [], 0
    for c in head:
        if c in '([':
            depth += 1
        elif c in ')]':
            depth -= 1
        elif depth == 0:
            out.append(c)
    return ''.join(out)


def classify(head):
    """What a `{` opens at namespace or class scope, from the text before it
    (since the last ';', '{' or '}' there): namespace, class, function or
    init (a brace initializer, or anything else that is not a body)."""
    h = skip_template(head).strip()
    if re.match(r'(?:inline\s+)?namespace\b', h) or re.match(r'extern\s*$', h):
        return 'namespace'
    if _CLASS.match(h):
        return 'class'
    if '(' not in h or h.count('(') > h.count(')'):
        return 'init'  # also a lambda in a constructor's list or an argument
    top = top_level(h)
    if re.search(r'(?<![=!<>])=(?!=)', top) and not re.search(r'\boperator\b', h):
        return 'init'  # an initializer: int x = F(...) {...} is not a body
    if re.search(r'\)\s*(?:const\s*)?(?:noexcept\s*)?:[^:]', h) and re.search(r'[\w>]\s*$', h):
        return 'init'  # a member's brace initializer in a constructor's list
    return 'function'


def function_name(head):
    h = skip_template(head)
    m = _OPERATOR.search(h)
    if m:
        return re.sub(r'\s+', '', m.group(1))
    depth = 0
    for i, c in enumerate(h):
        if c == '(' and depth == 0:
            m = _NAME.search(h[:i])
            return m.group(1).replace(' ', '') if m else '?'
        depth += {'<': 1, '>': -1}.get(c, 0) if c in '<>' else 0
    return '?'


def functions(text):
    """Yields (first line, last line, name) of each function in C++ `text`."""
    code = blank(text)
    line_at = [0] * (len(code) + 1)
    n = 1
    for i, c in enumerate(code):
        line_at[i] = n
        if c == '\n':
            n += 1
    stack = []  # (kind, (start, name) of a function) of each open brace
    head_start = 0
    for i, c in enumerate(code):
        # Inside a body or an initializer every brace is a block.
        opaque = any(kind in ('function', 'init') for kind, _ in stack)
        if c == '{':
            if opaque:
                stack.append(('block', None))
                continue
            head = code[head_start:i]
            kind = classify(head)
            start = head_start + len(head) - len(head.lstrip())
            m = _ACCESS.match(code, start)
            while m:
                start = m.end() + len(code[m.end():i]) - len(code[m.end():i].lstrip())
                m = _ACCESS.match(code, start)
            stack.append((kind, (start, function_name(code[start:i])) if kind == 'function'
                          else None))
            if kind != 'init':
                head_start = i + 1
        elif c == '}':
            if not stack:
                continue
            kind, info = stack.pop()
            if kind == 'function':
                yield line_at[info[0]], line_at[i], info[1]
            if kind in ('function', 'class', 'namespace'):
                head_start = i + 1
        elif c == ';' and not opaque:
            head_start = i + 1
        elif c == ':' and not opaque and _ACCESS.match(code[head_start:i + 1] + ' '):
            head_start = i + 1


def check(root, max_lines, show_all=False):
    over = []
    for top in PRODUCT_DIRS:
        for dirpath, _, files in sorted(os.walk(os.path.join(root, top))):
            for f in sorted(files):
                if not f.endswith('.cc'):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                with open(path, errors='replace') as fh:
                    text = fh.read()
                for first, last, name in functions(text):
                    length = last - first + 1
                    if show_all:
                        print(f"{length:5d} {rel}:{first}: {name}")
                    if length > max_lines:
                        over.append(f"{rel}:{first}: {name} is {length} lines "
                                    f"(at most {max_lines})")
    return over


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=ROOT, help="repository root (default: this script's)")
    ap.add_argument("--max", type=int, default=MAX_LINES, help="longest allowed (lines)")
    ap.add_argument("--all", action="store_true", help="print every function's length")
    args = ap.parse_args()
    over = check(args.root, args.max, args.all)
    for o in over:
        print(o)
    if over:
        print(f"{len(over)} function(s) over {args.max} lines: split them into named steps",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
