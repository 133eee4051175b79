"""Ask the serving environment's own vLLM whether it accepts the server's arguments.

Standalone (standard library only, plus the vLLM installed where it runs): the Kubernetes
collector runs it inside the serving container as
`python3 -c SCRIPT --llmdoctor-vllm-args '{"args": [...], "positional_model": true}'` and keeps
what it prints as serving/vllm-args.json. vLLM's own argument parser knows every flag of the
release in the image, which a table of flags kept by llmdoctor cannot: "unrecognized arguments:
--disable-log-requests" after an image upgrade is exactly what this reports.

Always prints one JSON object: {"vllm": version or null, "accepted": true/false/null,
"error": text or null, "parsed": {dest: value} (JSON-able values only)}.
"""

import importlib.metadata
import json
import sys


class _Refused(Exception):
    pass


def _parser():
    from vllm.entrypoints.openai.cli_args import make_arg_parser

    try:  # where vLLM keeps its argparse subclass moved between releases
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    return make_arg_parser(FlexibleArgumentParser())


def _plain(value):
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (bool, int, float, str)) for v in value
    ):
        return list(value)
    return str(value)


def main(argv):
    out = {"vllm": None, "accepted": None, "error": None, "parsed": None}
    try:
        out["vllm"] = importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        out["error"] = "vLLM is not installed in this python"
        print(json.dumps(out))
        return 0
    try:
        request = json.loads(argv[argv.index("--llmdoctor-vllm-args") + 1])
        args = [str(a) for a in request["args"]]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        out["error"] = f"no arguments to check ({exc})"
        print(json.dumps(out))
        return 0
    if request.get("positional_model") and args and not args[0].startswith("-"):
        args = ["--model", args[0], *args[1:]]  # `vllm serve MODEL` = the server's --model
    try:
        parser = _parser()
    except Exception as exc:  # an old or broken vLLM: say so, never guess
        out["error"] = f"cannot load vLLM's argument parser: {type(exc).__name__}: {exc}"
        print(json.dumps(out))
        return 0

    def refuse(message):
        raise _Refused(message)

    parser.error = refuse
    try:
        namespace = parser.parse_args(args)
    except _Refused as exc:
        out["accepted"], out["error"] = False, str(exc)
    except SystemExit as exc:  # a parser that exits on its own
        out["accepted"], out["error"] = False, f"vLLM's parser exited ({exc.code})"
    else:
        out["accepted"] = True
        out["parsed"] = {k: _plain(v) for k, v in sorted(vars(namespace).items())}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
