#!/usr/bin/env python3
"""The build path's hops: which files of the user layer (cli/, session/,
studies/, watch/, report/, main.rs) a `superstep build` executes, and the calls that
cross from one of those files to another, read from a callgrind profile.

Usage (from the repository root; the binary needs line tables, which the
release profile keeps):

    bash scripts/measurements/build_path_hops.sh [BINARY]

runs `valgrind --tool=callgrind BINARY build queries/vit-tiny.toml
--no-cache -q` in a scratch folder and then this script on its profile:

    python3 scripts/measurements/build_path_hops.py callgrind.out

Calls into a progress observer (a trait object the CLI hands the session)
count like any other call. Code clap's derive generates (each command's
`Args` implementation, run while parsing the command line) is not the
build path and is left out.
"""

import re
import sys

USER_LAYER = (
    "src/cli/",
    "src/session/",
    "src/studies/",
    "src/watch/",
    "src/report/",
    "src/main.rs",
)


def resolve(names, token):
    """Callgrind compresses names: `(7) path` defines id 7, `(7)` reuses it."""
    match = re.match(r"\((\d+)\)(?:\s+(.*))?", token)
    if not match:
        return token
    identifier, name = match.group(1), match.group(2)
    if name:
        names[identifier] = name
    return names.get(identifier)


def user_file(path):
    """`cli/build.rs` for a path inside the user layer, else None."""
    if path is None:
        return None
    for prefix in USER_LAYER:
        position = path.find(prefix)
        if position >= 0:
            return path[position + len("src/"):]
    return None


def generated(function):
    """Whether `function` is argument parsing that clap's derive made."""
    return function is not None and "clap" in function


def hops(profile):
    files, functions = {}, {}
    function_file = current_file = callee_file = None
    function = callee = None
    visited, crossings, function_crossings = set(), set(), set()
    for line in open(profile, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("fl="):
            function_file = current_file = resolve(files, line[3:])
        elif line.startswith(("fi=", "fe=")):
            current_file = resolve(files, line[3:])
        elif line.startswith("fn="):
            function = resolve(functions, line[3:])
            current_file = function_file
            if user_file(function_file) and not generated(function):
                visited.add(user_file(function_file))
        elif line.startswith(("cfi=", "cfl=")):
            callee_file = resolve(files, line[4:])
        elif line.startswith("cfn="):
            callee = resolve(functions, line[4:])
        elif line.startswith("calls="):
            if generated(function) or generated(callee):
                continue
            caller_file, callee_file_name = user_file(current_file), user_file(callee_file)
            if caller_file and callee_file_name and caller_file != callee_file_name:
                crossings.add((caller_file, callee_file_name))
                function_crossings.add((function, callee, callee_file_name))
            if callee_file_name:
                visited.add(callee_file_name)
    return visited, crossings, function_crossings


def main():
    visited, crossings, function_crossings = hops(sys.argv[1])
    print(f"user-layer files executed: {len(visited)}")
    for name in sorted(visited):
        print(f"  {name}")
    print(f"calls from one user-layer file to another (distinct pairs): {len(crossings)}")
    for caller, callee in sorted(crossings):
        print(f"  {caller} -> {callee}")
    print(
        "calls from a function of one user-layer file to one of another "
        f"(distinct caller-callee pairs): {len(function_crossings)}"
    )
    entries = {}
    for _, _, callee_file_name in function_crossings:
        entries[callee_file_name] = entries.get(callee_file_name, 0) + 1
    print("entries into each file (distinct caller-callee pairs arriving from another file):")
    for name, count in sorted(entries.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {count:3} {name}")


if __name__ == "__main__":
    main()
