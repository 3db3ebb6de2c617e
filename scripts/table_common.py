"""What scripts/tables.py and scripts/perf_tables.py share: where results
live, how a results file is read, and how a figure is printed.

Python 3 standard library only; imported, never run.
"""
import decimal
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def path_of(rel):
    return os.path.join(ROOT, rel)


def read_text(rel):
    return open(path_of(rel), encoding="utf-8").read()


def load_json(rel):
    return json.load(open(path_of(rel), encoding="utf-8"))


def render(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def grouped(v):
    return f"{v:,.0f}"


def ms(text):
    """Milliseconds as the docs print them, rounded half up from the run's
    decimals: 0.56, 1.14 (below 2 ms), 5.0, 13.5."""
    v = decimal.Decimal(str(text))
    step = decimal.Decimal("0.01") if v < 2 else decimal.Decimal("0.1")
    return str(v.quantize(step, decimal.ROUND_HALF_UP))


def bucket(text):
    """A histogram bound "5.000" as "5", "0.250" as "0.25"."""
    return f"{float(text):g}"
