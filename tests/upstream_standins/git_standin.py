"""Stand-in of ``git`` in the harness container (no network there, no git in the test bed's Debian image): the
clones NVIDIA's trees make (v5.1 ``Makefile.build`` ``clone_loadgen``: ``git clone URL DIR``, then ``git fetch``,
``git checkout HASH``, ``git submodule update``; v6.0 README and workload's pinned clone: ``git clone --depth 1``,
``git init``, ``git -C DIR fetch --depth 1 URL COMMIT``, ``git -C DIR checkout``) make DIR a folder with ``.git/``,
the URL (and commit) recorded in ``.git/standin-origin``; a clone of MLCommons' inference repository gets the round's
checker (``$STANDIN_CHECKER_STUB``, tests/upstream_standins/pinned_checker.py) at ``$STANDIN_CHECKER_REL`` (where
NVIDIA's code imports it from). ``git version`` is answered by ``bin/git``, the shell front that runs this file."""

import os
import shutil
import sys

args = sys.argv[1:]
where = os.getcwd()
if len(args) >= 2 and args[0] == "-C":
    where, args = os.path.join(where, args[1]), args[2:]
command = args[0] if args else ""
rest = [a for a in args[1:] if not a.startswith("-")]


def cloned(folder, url, *extra):
    os.makedirs(os.path.join(folder, ".git"), exist_ok=True)
    with open(os.path.join(folder, ".git", "standin-origin"), "w") as out:
        out.write(" ".join([url, *extra]) + "\n")
    if "mlcommons/inference" in url and os.environ.get("STANDIN_CHECKER_REL"):
        target = os.path.join(folder, os.environ["STANDIN_CHECKER_REL"])
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.environ["STANDIN_CHECKER_STUB"], target)


if command == "clone":
    url, folder = rest[-2], rest[-1]
    if "--depth" in args:  # "--depth 1": its value is not a positional argument
        url, folder = [a for a in rest if a != "1"][-2:]
    cloned(os.path.join(where, folder), url)
elif command == "init":
    os.makedirs(os.path.join(where, rest[-1] if rest else ".", ".git"), exist_ok=True)
elif command == "fetch" and len([a for a in rest if a != "1"]) >= 2:
    url, commit = [a for a in rest if a != "1"][-2:]
    cloned(where, url, commit)
elif command in ("fetch", "checkout", "submodule", "config", "rev-parse", "status"):
    pass
else:
    print(f"git stand-in: {' '.join(sys.argv[1:])} is not stood in", file=sys.stderr)
    sys.exit(2)
