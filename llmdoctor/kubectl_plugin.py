"""`kubectl llmdoctor ...`: the kubectl plugin entry points (console scripts
`kubectl-llmdoctor` and `kubectl_complete-llmdoctor`).

kubectl hands a plugin every argument after its name, its own global flags included, so
`kubectl llmdoctor -n serving --kubeconfig ~/.kube/prod diagnose pod/x` arrives here as is.
`--kubeconfig` becomes KUBECONFIG (as kubectl reads it); `-n/--namespace` and `--context`
typed before the command move after it for diagnose and collect, and are dropped, before or
after the command, for the commands that never talk to the cluster.
"""

from __future__ import annotations

import os
import sys

# kubectl global flags llmdoctor's commands take, each with a value; the commands that take
# them (the others — wiki, explain, node ... — do not talk to the cluster and drop them)
MOVABLE = {"-n", "--namespace", "--context"}
TAKES_NAMESPACE = {"diagnose", "collect"}


def _split_flag(arg: str) -> tuple[str, str | None]:
    if arg.startswith("--") and "=" in arg:
        name, value = arg.split("=", 1)
        return name, value
    if arg.startswith("-n") and len(arg) > 2 and not arg.startswith("--"):
        return "-n", arg[2:].lstrip("=")
    return arg, None


def translate(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(llmdoctor's arguments, environment to set) for the arguments kubectl passed."""
    env: dict[str, str] = {}
    leading: list[str] = []
    rest: list[str] = []
    i, command = 0, None
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest += argv[i:]
            break
        name, value = _split_flag(arg)
        takes_value = name == "--kubeconfig" or name in MOVABLE
        if takes_value and value is None and i + 1 < len(argv):
            value = argv[i + 1]
            i += 1
        if name == "--kubeconfig" and value is not None:
            env["KUBECONFIG"] = os.path.expanduser(value)
        elif name in MOVABLE and value is not None and command is None:
            leading += [name, value]
        elif name in MOVABLE and value is not None and command not in TAKES_NAMESPACE:
            pass  # after a command that never talks to the cluster: ignored, as before it
        elif takes_value and value is not None:
            rest += [name, value]
        else:
            if command is None and not arg.startswith("-"):
                command = arg
            rest.append(arg)
        i += 1
    if leading and rest and rest[0] in TAKES_NAMESPACE:
        rest = rest[:1] + leading + rest[1:]  # click takes options after the command word
    elif leading and not rest:
        rest = leading  # `kubectl llmdoctor -n x`: let llmdoctor say what is missing
    return rest, env


def main() -> None:
    """`kubectl llmdoctor ARGS` = `llmdoctor ARGS` with kubectl's flags honoured."""
    args, env = translate(sys.argv[1:])
    os.environ.update(env)
    from llmdoctor.__main__ import end_process
    from llmdoctor.cli import run

    try:
        run(args)
    except SystemExit as done:
        end_process(done.code)
    end_process(0)


def complete_main() -> None:
    """kubectl's plugin completion (kubectl 1.26+): `kubectl_complete-llmdoctor ARGS WORD`
    prints one candidate per line, then cobra's directive line (:4 = no file completion)."""
    argv = sys.argv[1:]
    words, incomplete = (argv[:-1], argv[-1]) if argv else ([], "")
    args, env = translate(words)
    os.environ.update(env)
    from llmdoctor.cli import build_app
    from llmdoctor.commands.shell_completion import completions

    for value in completions(build_app(), args, incomplete):
        sys.stdout.write(f"{value}\n")
    sys.stdout.write(":4\n")
    from llmdoctor.__main__ import end_process

    end_process(0)  # the cluster lookup's thread may still wait on a silent API server
