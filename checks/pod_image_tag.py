"""Images tagged `latest` or not tagged at all: the version can change under you at any restart.

An untagged or :latest image also defaults to imagePullPolicy Always, so every restart pulls
the multi-GB vLLM image again. A digest (@sha256:...) pins the image whatever the tag says.
"""

from __future__ import annotations

from llmdoctor.engine.facts import FactMissing, Facts
from llmdoctor.engine.findings import Finding, evidence, ok, warning
from llmdoctor.engine.registry import check
from llmdoctor.parsers.k8s_pod import container_status, containers, image_tag, require_pod


@check(
    "pod-image-tag",
    title="Container images pinned to a version",
    scope="k8s",
    needs=("k8s/pod.json",),
    runbooks=("image-pull-slow",),
    before_start=True,
)
def pod_image_tag(facts: Facts) -> list[Finding]:
    pod = require_pod(facts)
    findings = []
    images = [str(c["image"]) for c in containers(pod) if c.get("image")]
    if not images:
        raise FactMissing("k8s/pod.json", "no container has an image in the pod spec")
    for c in containers(pod):
        image = str(c.get("image") or "")
        if not image:
            continue
        _, tag, digest = image_tag(image)
        if digest or (tag and tag != "latest"):
            continue
        what = "tagged latest" if tag == "latest" else "not tagged (means latest)"
        policy = c.get("imagePullPolicy") or "Always"
        items = [
            evidence(f"image: {image}", source="k8s/pod.json"),
            evidence(f"imagePullPolicy: {policy}", source="k8s/pod.json"),
        ]
        running = container_status(pod, c.get("name")).get("imageID")
        if running:
            items.append(evidence(f"running imageID: {running}", source="k8s/pod.json"))
        findings.append(
            warning(
                "pod-image-tag",
                f"image {image} is {what}: each restart may run a different vLLM version"
                + (" and pulls the image again" if policy == "Always" else ""),
                items,
                ["image-pull-slow"],
                f"container {c.get('name', '?')}",
            )
        )
    if findings:
        return findings
    return [ok("pod-image-tag", f"images pinned: {', '.join(images)}")]
