#!/usr/bin/env python3
"""Fails on the co_await shapes g++ 12 miscompiles (docs/architecture.md, "Coroutines and g++ 12").

g++ 12 (Debian 12's compiler) corrupts the coroutine frame when a full-expression that contains
co_await also holds one of these; each was reproduced under ASan (double free, bad free, use
after free) while clang 14 runs the same code correctly:

  conditional   a ?: anywhere in the statement: `co_await f(x ? a : b)`, `co_await (x ? f() : g())`
                (the crash behind `free(): invalid size` in CreateBucket's error answer)
  braced        a braced temporary: `co_await f(x, {})`, `co_await f(Opt{a, b})`
  capture       a lambda capturing by value in the operand: `co_await Take([s] { ... }())`
                (by reference, `[&]` or `[&x]`, is fine: the closure has nothing to destroy)
  condition     co_await in the condition of if / while / for / switch: `if (!co_await f())`

Calls that build temporaries (`StrCat(...)`, `std::string(x)`, string literals bound to
std::string parameters) were checked the same way and are fine. The remedy is always the same:
bind the value to a named local first, then co_await with plain operands.

Usage: co_await_check.py [ROOT...]   (default: the repository's libopenlake, tools, bench, tests,
bindings). Exit 0 when clean, 1 with one line per finding (file:line: kind: the statement).
"""
import os
import re
import sys

EXTS = (".cc", ".h", ".cpp", ".hpp")
CONTROL = {"if", "while", "for", "switch"}
TOKEN = re.compile(r"""
    (?P<id>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<num>\.?[0-9](?:[eEpP][+-]|['A-Za-z0-9_.])*)
  | (?P<punct>::|->\*?|\.\.\.|<<=|>>=|<=>|\+\+|--|&&|\|\||[-+*/%^&|<>!=]=|<<|>>|[{}()\[\];,?:.~!+\-*/%^&|<>=#])
""", re.VERBOSE)


def strip(text):
    """Comments, string and character literals and preprocessor lines become spaces (newlines
    kept), so the tokens left are code and line numbers stay right."""
    out = []
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":  # a directive, with its continuation lines
            j = i
            while j < n and (text[j] != "\n" or text[j - 1] == "\\"):
                j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
            continue
        if c == "\n":
            line_start = True
            out.append(c)
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and i + 1 < n and text[i + 1] == '"' and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if not m:
                out.append(c)
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + " " * max(0, j - i - 2) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def tokenize(code):
    toks = []
    line = 1
    pos = 0
    for m in TOKEN.finditer(code):
        line += code.count("\n", pos, m.start())
        pos = m.start()
        kind = m.lastgroup
        toks.append((m.group(kind), line))
    return toks


OPEN = {"(": ")", "[": "]", "{": "}"}


def match(toks, i):
    """Index of the bracket closing the one at i (or len(toks))."""
    want = OPEN[toks[i][0]]
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j][0]
        if t in OPEN:
            depth += 1
        elif t in (")", "]", "}"):
            depth -= 1
            if depth == 0:
                return j
    return len(toks)


def lambda_at(toks, i):
    """When toks[i] is '[' opening a lambda: (capture list tokens, index of the body's '{',
    index of its '}'); else None."""
    if toks[i][0] != "[" or (i + 1 < len(toks) and toks[i + 1][0] == "["):
        return None
    prev = toks[i - 1][0] if i > 0 else ";"
    if re.match(r"[A-Za-z_0-9]", prev) and prev not in ("return", "co_return", "co_await", "co_yield"):
        return None  # a subscript: a[i]
    if prev in (")", "]", ">"):
        return None
    close = match(toks, i)
    j = close + 1
    if j < len(toks) and toks[j][0] == "<":  # template parameters
        depth = 0
        while j < len(toks):
            depth += toks[j][0] == "<"
            depth -= toks[j][0] == ">"
            j += 1
            if depth == 0:
                break
    if j < len(toks) and toks[j][0] == "(":
        j = match(toks, j) + 1
    while j < len(toks) and toks[j][0] not in ("{", ";", ")", ","):
        if toks[j][0] in ("(", "["):
            j = match(toks, j)
        j += 1
    if j >= len(toks) or toks[j][0] != "{":
        return None
    return toks[i + 1:close], j, match(toks, j)


def by_value_captures(caps):
    items, cur, depth = [], [], 0
    for t, _ in caps:
        if t in ("(", "[", "{", "<"):
            depth += 1
        elif t in (")", "]", "}", ">"):
            depth -= 1
        if t == "," and depth == 0:
            items.append(cur)
            cur = []
        else:
            cur.append(t)
    if cur:
        items.append(cur)
    bad = []
    for it in items:
        if not it or it[0] == "&" or it == ["this"]:
            continue
        bad.append("".join(it))
    return bad


def statement_bounds(toks, i):
    """[start, end) of the statement holding the co_await at i, and the control keyword whose
    parenthesised head holds it (or None)."""
    depth = 0
    s = i
    control = None
    while s > 0:
        t = toks[s - 1][0]
        if t in (")", "]"):
            depth += 1
        elif t in ("(", "["):
            if depth == 0:
                before = toks[s - 2][0] if s >= 2 else ""
                if before == "constexpr" and s >= 3:
                    before = toks[s - 3][0]
                if t == "(" and before in CONTROL and control is None:
                    control = before
            else:
                depth -= 1
        elif t == "}" and depth == 0:
            break
        elif t == "{" and depth == 0:
            break
        elif t == "{":
            depth -= 1  # inside a braced init that opened further out
        elif t == ";" and depth == 0:
            break
        s -= 1
    depth = 0
    e = i
    while e < len(toks):
        t = toks[e][0]
        if t in ("(", "[", "{"):
            if t == "[":
                lam = lambda_at(toks, e)
                if lam:
                    e = lam[2] + 1
                    continue
            depth += 1
        elif t in (")", "]", "}"):
            if depth == 0:
                break
            depth -= 1
        elif t == ";" and depth == 0:
            break
        e += 1
    return s, e, control


def check_file(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    if "co_await" not in text:
        return []
    toks = tokenize(strip(text))
    findings = []
    seen = set()
    for i, (t, line) in enumerate(toks):
        if t != "co_await" or (i > 0 and toks[i - 1][0] == "operator"):
            continue
        # The awaiter itself may be brace-initialised (`co_await io::Yield{}`,
        # `co_await io::Sleep{d}`): its braces are not a temporary of the operand's call.
        awaiter_braces = None
        k = i + 1
        while k + 1 < len(toks) and re.match(r"[A-Za-z_]", toks[k][0]) and toks[k + 1][0] == "::":
            k += 2
        if k + 1 < len(toks) and re.match(r"[A-Za-z_]", toks[k][0]) and toks[k + 1][0] == "{":
            awaiter_braces = k + 1
        s, e, control = statement_bounds(toks, i)
        snippet = " ".join(x for x, _ in toks[s:min(e, s + 24)])
        kinds = []
        if control:
            kinds.append(f"condition (co_await in the head of `{control}`)")
        j = s
        while j < e:
            tok = toks[j][0]
            if tok == "[":
                lam = lambda_at(toks, j)
                if lam:
                    caps, body, close = lam
                    bad = by_value_captures(caps)
                    if bad:
                        kinds.append("capture (lambda capturing by value: " + ", ".join(bad) + ")")
                    j = close + 1
                    continue
            elif tok == "?":
                kinds.append("conditional (?: in a co_await statement)")
            elif tok == "{" and j == awaiter_braces:
                pass
            elif tok == "{":
                kinds.append("braced (a braced temporary in a co_await statement)")
                j = match(toks, j) + 1
                continue
            j += 1
        for k in kinds:
            key = (toks[s][1], k)
            if key in seen:
                continue
            seen.add(key)
            findings.append(f"{path}:{line}: {k}: {snippet}")
    return findings


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))
    roots = argv[1:] or [os.path.join(top, d) for d in ("libopenlake", "tools", "bench", "tests", "bindings")]
    findings = []
    files = 0
    for root in roots:
        walk = [(root, [], [os.path.basename(root)])] if os.path.isfile(root) else os.walk(root)
        for d, _, names in walk:
            for name in sorted(names):
                p = d if os.path.isfile(d) else os.path.join(d, name)
                if p.endswith(EXTS):
                    files += 1
                    findings += check_file(p)
    for f in findings:
        print(os.path.relpath(f, top) if f.startswith(top) else f)
    if findings:
        print(f"co_await_check: {len(findings)} statement(s) g++ 12 may miscompile; bind the "
              "value to a named local first (docs/architecture.md)", file=sys.stderr)
        return 1
    print(f"co_await_check: {files} files, no co_await statement g++ 12 miscompiles")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
