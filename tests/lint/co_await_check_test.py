#!/usr/bin/env python3
"""The co_await check itself: each shape g++ 12 miscompiled (reproduced under ASan: double free,
bad free, use after free) is found, and the shapes it compiles right pass."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import co_await_check  # noqa: E402

FLAGGED = {
    # The daemon's crash: a std::string temporary from ?: inside the operand.
    "ternary_in_args": 'co_await c.Error("X", 400, StrCat("The ", r->empty() ? "unspecified" : *r, "."));',
    "ternary_argument": "co_await Take(r->empty() ? std::string(\"u\") : *r);",
    "ternary_of_awaitables": "v = co_await (r->empty() ? A() : B(*r));",
    "co_await_in_ternary": "v = r->empty() ? 5 : co_await B(*r);",
    "init_capture": "co_await Take([s = *r]() { return s; }());",
    "copy_capture": "co_await Take([s, &t]() { return s + t; }());",
    "default_copy_capture": "co_await Take([=]() { return s; }());",
    "braced_empty": "v = co_await TakeOpt(1, {});",
    "braced_aggregate": "v = co_await TakeOpt(1, Opt{*r, 2});",
    "negated_condition": "if (!co_await f()) co_return;",
    "while_condition": "while (co_await More(x)) {\n  ++n;\n}",
    "multi_line": 'co_await c.Error(c.auth.presigned ? "A"\n                                  : "B",\n  400, msg);',
    "in_a_coroutine_lambda": "auto t = [&]() -> io::Task<void> {\n  co_await Take(a ? b : c);\n};",
}
CLEAN = {
    "named_first": 'const std::string_view n = r->empty() ? std::string_view("u") : std::string_view(*r);\n'
                   'std::string m = StrCat("The ", n, ".");\nco_await c.Error("X", 400, std::move(m));',
    "strcat_temporary": 'co_await c.Error("X", 400, StrCat("The ", *r, "."));',
    "literal_to_string_param": 'co_await c.Error("X", 400, "a literal");',
    "ref_lambda_op": "const int32_t n = co_await io::Op([&](io::Completion* c) { r.Write(fd, p, len, 0, c); });",
    "lambda_body_may_use_ternary": "co_await io::Op([&](io::Completion* c) { f(x ? 1 : 2, c); });",
    "lambda_body_braces": "co_await io::Op([&rr, &buf](io::Completion* c) { if (x) { g(); } rr.Recv(c); });",
    "awaiter_braces": "co_await io::Yield{};\nco_await io::Sleep{absl::Milliseconds(4)};",
    "ternary_elsewhere": "const int k = a ? 1 : 2;\nco_await Take(k);",
    "macro": "OL_CO_RETURN_IF_ERROR(co_await SendAll(out));",
    "return_await": "co_return co_await SendAll(head);",
    "block_after_if": "if (x) {\n  co_await f();\n}",
    "subscript": "co_await Take(names[i]);",
    "operator_decl": "Awaiter operator co_await() && noexcept { return Awaiter{h_.get()}; }",
    "comment_and_string": '// co_await f(a ? b : c) in a comment\nco_await Take("a ? b : {c}");',
}


def findings(snippet):
    with tempfile.NamedTemporaryFile("w", suffix=".cc", delete=False) as f:
        f.write("void F() {\n" + snippet + "\n}\n")
        path = f.name
    try:
        return co_await_check.check_file(path)
    finally:
        os.unlink(path)


def main():
    failed = 0
    for name, code in FLAGGED.items():
        if not findings(code):
            print(f"FAIL: not flagged: {name}: {code}")
            failed += 1
    for name, code in CLEAN.items():
        got = findings(code)
        if got:
            print(f"FAIL: flagged though fine: {name}: {got}")
            failed += 1
    total = len(FLAGGED) + len(CLEAN)
    print(f"co_await_check_test: {total - failed} of {total} cases right")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
