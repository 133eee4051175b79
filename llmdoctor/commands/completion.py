"""`llmdoctor completion SHELL` — print the shell completion script."""

from typing import Annotated

import typer

SHELLS = ("bash", "zsh", "fish")


def completion_command(
    shell: Annotated[str, typer.Argument(help="bash, zsh or fish.")],
) -> None:
    """Print the completion script: runbook ids after `wiki show`, pod/deploy/sts names
    after `diagnose` and `collect` (from the cluster, given up after 1 s).

    Examples:

      source <(llmdoctor completion bash)               # in ~/.bashrc

      llmdoctor completion zsh > "${fpath[1]}/_llmdoctor"

      llmdoctor completion fish > ~/.config/fish/completions/llmdoctor.fish
    """
    from llmdoctor.commands.shell_completion import script
    from llmdoctor.errors import BadInput

    if shell not in SHELLS:
        raise BadInput(f"completion {shell!r}: expected one of {', '.join(SHELLS)}")
    typer.echo(script(shell))


def register(app: typer.Typer) -> None:
    app.command("completion")(completion_command)
