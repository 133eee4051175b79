"""Shell completion: runbook ids for `wiki show`, pod/deploy/sts names for `diagnose` and
`collect` (listed from the cluster within CLUSTER_BUDGET seconds, or not at all), and the
scripts that hook llmdoctor into bash, zsh and fish.

Annotations are real objects here (no `from __future__ import annotations`): typer picks a
completion callback's arguments by their types.
"""

import os
import threading

import typer

CLUSTER_BUDGET = 1.0  # seconds: an unreachable API server must not freeze the shell
BUDGET_ENV = "LLMDOCTOR_COMPLETION_TIMEOUT"  # a slower cluster (a VPN away) may be given more
KINDS = {
    "pod": "pods",
    "deploy": "deployments",
    "deployment": "deployments",
    "sts": "statefulsets",
    "statefulset": "statefulsets",
}
STARTS = ("pod/", "deploy/", "sts/", "node", "http://", "https://")


def runbook_ids(incomplete: str) -> list[str]:
    """Entry ids of the wiki (built-in and LLMDOCTOR_WIKI) that start with what was typed."""
    try:
        from llmdoctor.wiki.catalog import all_ids

        return sorted(i for i in all_ids(None) if i.startswith(incomplete))
    except Exception:  # a completion never prints a traceback into the shell
        return []


def cluster_budget() -> float:
    """CLUSTER_BUDGET, or LLMDOCTOR_COMPLETION_TIMEOUT seconds when that is a number in (0, 30]."""
    try:
        value = float(os.environ.get(BUDGET_ENV, ""))
    except ValueError:
        return CLUSTER_BUDGET
    return value if 0 < value <= 30 else CLUSTER_BUDGET


def cluster_names(
    resource: str, namespace: str | None, context: str | None, budget: float | None = None
) -> list[str]:
    """Names of the pods / deployments / statefulsets of a namespace, or [] when the cluster
    does not answer within `budget` seconds (cluster_budget()) of the client being loaded (the
    listing thread is left to die on its own)."""
    budget = cluster_budget() if budget is None else budget
    found: list[str] = []
    try:
        # importing the client is local work of bounded length (slow on a busy machine); only
        # the wait for the API server is held to the budget
        from llmdoctor.collectors.k8s_client import connect, read_json
    except Exception:
        return []

    def work() -> None:
        try:
            conn = connect(context, namespace, timeout=budget)
            call = {
                "pods": lambda: conn.core().list_namespaced_pod,
                "deployments": lambda: conn.apps().list_namespaced_deployment,
                "statefulsets": lambda: conn.apps().list_namespaced_stateful_set,
            }[resource]()
            doc = read_json(conn, call, "list", resource, True, namespace=conn.namespace)
            found.extend(i["metadata"]["name"] for i in doc.get("items") or [])
        except Exception:
            return

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(budget)
    return [] if thread.is_alive() else sorted(found)


def target_candidates(incomplete: str, namespace: str | None, context: str | None) -> list[str]:
    """What `diagnose TARGET` may be, given what was typed so far."""
    kind, sep, rest = incomplete.partition("/")
    if not sep or kind not in KINDS:
        return [s for s in STARTS if s.startswith(incomplete)]
    names = cluster_names(KINDS[kind], namespace, context)
    return [f"{kind}/{n}" for n in names if n.startswith(rest)]


def complete_target(ctx: typer.Context, incomplete: str) -> list[str]:
    """typer autocompletion for a diagnose/collect target (reads -n and --context)."""
    params = ctx.params or {}
    return target_candidates(incomplete, params.get("namespace"), params.get("context"))


def complete_runbook_id(incomplete: str) -> list[str]:
    """typer autocompletion for `wiki show ID`."""
    return runbook_ids(incomplete)


def enable_shell_completion() -> None:
    """Register typer's bash/zsh/fish/powershell completion classes (llmdoctor builds its app
    with add_completion=False, so they are registered only when a shell asks)."""
    from typer._completion_classes import completion_init

    completion_init()


def script(shell: str, prog_name: str = "llmdoctor") -> str:
    """The completion script to source in `shell`."""
    from typer._completion_shared import get_completion_script

    enable_shell_completion()
    complete_var = f"_{prog_name}_COMPLETE".replace("-", "_").upper()
    return get_completion_script(prog_name=prog_name, complete_var=complete_var, shell=shell)


def completions(app, args: list[str], incomplete: str) -> list[str]:
    """What the shell would offer after `llmdoctor ARGS INCOMPLETE` (kubectl's plugin
    completion calls this)."""
    from typer._completion_classes import BashComplete

    command = typer.main.get_command(app)
    complete = BashComplete(command, {}, "llmdoctor", "_LLMDOCTOR_COMPLETE")
    return [item.value for item in complete.get_completions(args, incomplete)]
