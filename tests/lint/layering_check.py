#!/usr/bin/env python3
"""Fails when a subsystem of libopenlake includes one it must not (docs/architecture.md,
"Dependency order"), when a public header includes a private one, or when a consumer of the
library (tools/, bindings/, examples/) reaches past the public headers.

Each folder under libopenlake/ is a subsystem; a public header belongs to the subsystem its
path names (openlake/kv/client.h to kv/; the loose openlake/*.h, to common/, but admin.h to
admin/). The generated headers belong where their sources are (kv/kv.pb.h to kv/, the private
config.h to common/). The check also reads libopenlake/meson.build: its subdir() order must list
every subsystem after the ones it uses, and every folder must be in this table.

Usage: layering_check.py [REPO_ROOT]. Exit 0 when clean, 1 with one line per finding.
"""
import os
import re
import sys

# What each subsystem may include besides itself. Keep it in step with docs/architecture.md.
ALLOWED = {
    "common": set(),
    "io": {"common"},
    "ec": {"common"},
    "cuda": {"common"},
    "net": {"common", "io"},
    "http": {"common", "io"},
    "node": {"common", "io", "net"},
    "cluster": {"common", "io", "net", "node"},
    "kv": {"common", "io", "net", "cluster"},
    "c": {"common", "kv"},
    "store": {"common", "io", "ec", "net"},
    "s3": {"common", "io", "ec", "http", "store"},
    "admin": {"common", "io", "http"},
}
# The loose public headers (include/openlake/*.h) and the subsystem each belongs to.
LOOSE_PUBLIC = {"admin": "admin"}  # everything else is common's
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def subsystem_of_public(path_in_openlake):
    parts = path_in_openlake.split("/")
    if len(parts) == 1:
        return LOOSE_PUBLIC.get(parts[0][:-2], "common")
    return parts[0]


def target_of(include):
    """(subsystem, public?) an include names, or (None, _) for one outside libopenlake."""
    parts = include.split("/")
    if parts[0] == "openlake" and len(parts) > 1:
        return subsystem_of_public("/".join(parts[1:])), True
    if include == "config.h":
        return "common", False
    if len(parts) > 1 and parts[0] in ALLOWED:
        return parts[0], False
    return None, False


def sources(folder):
    for d, _, names in os.walk(folder):
        for n in sorted(names):
            if n.endswith((".h", ".cc", ".cu", ".cpp")):
                yield os.path.join(d, n)


def check(root):
    lib = os.path.join(root, "libopenlake")
    findings = []
    pub_root = os.path.join(lib, "include", "openlake")
    # Folders: each must be a known subsystem.
    for name in sorted(os.listdir(lib)):
        p = os.path.join(lib, name)
        if os.path.isdir(p) and name != "include" and name not in ALLOWED:
            findings.append(f"libopenlake/{name}/: a subsystem missing from layering_check.py "
                            "(and docs/architecture.md)")
    for path in sources(lib):
        rel = os.path.relpath(path, lib)
        if rel.startswith("include/"):
            own = subsystem_of_public(os.path.relpath(path, pub_root))
            public = True
        else:
            own = rel.split("/")[0]
            public = False
        text = open(path, encoding="utf-8", errors="replace").read()
        for m in INCLUDE.finditer(text):
            inc = m.group(1)
            line = text.count("\n", 0, m.start()) + 1
            target, target_public = target_of(inc)
            where = f"libopenlake/{rel}:{line}"
            if public and not target_public and target is not None:
                findings.append(f"{where}: public header includes private \"{inc}\"")
                continue
            if target is None or target == own:
                continue
            if target not in ALLOWED.get(own, set()):
                findings.append(f"{where}: {own}/ includes \"{inc}\" of {target}/, which it must "
                                f"not use (allowed: {', '.join(sorted(ALLOWED.get(own, ()))) or 'none'})")
    # Consumers: the public headers only (and their own files).
    for folder in ("tools", "bindings", "examples"):
        for path in sources(os.path.join(root, folder)):
            text = open(path, encoding="utf-8", errors="replace").read()
            for m in INCLUDE.finditer(text):
                inc = m.group(1)
                target, target_public = target_of(inc)
                if target is not None and not target_public:
                    line = text.count("\n", 0, m.start()) + 1
                    findings.append(f"{os.path.relpath(path, root)}:{line}: includes the private "
                                    f"\"{inc}\"; consumers use include/openlake/ only")
    # meson.build: subdir() order lists every subsystem after what it uses.
    meson = open(os.path.join(lib, "meson.build")).read()
    order = re.findall(r"^subdir\('([a-z_]+)'\)", meson, re.M)
    seen = set()
    for name in order:
        if name not in ALLOWED:
            findings.append(f"libopenlake/meson.build: subdir('{name}') is not in the table")
            continue
        for dep in sorted(ALLOWED[name] - seen):
            if dep in order:
                findings.append(f"libopenlake/meson.build: subdir('{name}') comes before "
                                f"subdir('{dep}'), which it uses")
        seen.add(name)
    return findings


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    findings = check(root)
    for f in findings:
        print(f)
    if findings:
        print(f"layering_check: {len(findings)} finding(s)", file=sys.stderr)
        return 1
    print(f"layering_check: {len(ALLOWED)} subsystems, every include within its layer")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
