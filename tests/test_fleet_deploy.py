"""deploy/probe-exporter.yaml and deploy/probe-scrape-config.yaml: the manifests run what the
tests exercise, and Prometheus accepts the scrape configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from prom_tools import require_tool

from llmdoctor.fleet.exporter import ProbeSettings

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


def documents(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _flags(args: list[str]) -> dict[str, str]:
    return dict(a.removeprefix("--").split("=", 1) for a in args if a.startswith("--"))


def test_the_exporter_deployment_fits_its_probe_in_the_scrape_timeout():
    docs = {d["kind"]: d for d in documents("probe-exporter.yaml")}
    (container,) = docs["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert container["args"][:2] == ["llmdoctor", "exporter"]
    flags = _flags(container["args"])
    worst = float(flags["window"]) + 1.5 * float(flags["timeout"])
    scrape = docs["Probe"]["spec"]["scrapeTimeout"]
    assert worst < float(scrape.rstrip("s"))
    assert flags["listen"] == f":{container['ports'][0]['containerPort']}"
    assert (
        docs["Service"]["spec"]["selector"] == docs["Deployment"]["spec"]["selector"]["matchLabels"]
    )
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    settings = ProbeSettings(timeout=float(flags["timeout"]), window=float(flags["window"]))
    assert settings.budget(float(scrape.rstrip("s"))) == (settings.timeout, settings.window)


def test_the_scrape_config_relabels_like_blackbox_and_promtool_accepts_it(tmp_path):
    doc = yaml.safe_load((DEPLOY / "probe-scrape-config.yaml").read_text())
    probe = doc["scrape_configs"][0]
    assert probe["metrics_path"] == "/probe"
    targets = [r.get("target_label") for r in probe["relabel_configs"]]
    assert targets == ["__param_target", "instance", "__address__"]
    promtool = require_tool("promtool")
    config = tmp_path / "prometheus.yml"
    config.write_text(yaml.safe_dump(doc))
    done = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_daemonset_writes_the_textfile_into_the_host_folder_it_mounts():
    (ds,) = [d for d in documents("node-check-daemonset.yaml") if d["kind"] == "DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    script = container["args"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    host = {v["name"]: v.get("hostPath", {}).get("path") for v in spec["volumes"]}
    assert f"--prometheus-textfile {mounts['textfile']}/llmdoctor.prom" in script
    assert host["textfile"] == "/var/lib/node_exporter/textfile_collector"
    header = (DEPLOY / "node-check-daemonset.yaml").read_text()
    assert "--collector.textfile.directory=/var/lib/node_exporter/textfile_collector" in header
