"""The KubeRay manifest and the cluster example, without a Kubernetes or Ray cluster: the
manifest's entrypoint runs a config it mounts, with settings that validate, on images built
with the ray extra, and gives the driver every variable the config names."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import yaml

from vapipe.pipeline.config import load
from vapipe.pipeline.overrides import ENV_PATTERN

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "deploy" / "kuberay" / "vapipe.yaml"


def documents() -> dict[str, dict]:
    return {d["kind"]: d for d in yaml.safe_load_all(MANIFEST.read_text()) if d}


def test_the_job_runs_the_cluster_config_it_mounts_with_valid_settings() -> None:
    job = documents()["RayJob"]
    words = shlex.split(job["spec"]["entrypoint"])
    assert words[0] == "run-pipeline"
    config = Path(words[1])
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    mounts = {m["name"]: m["mountPath"] for m in head["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in head["volumes"]}
    # The config is the ConfigMap made from configs/cluster.toml (the header says how).
    assert str(config.parent) == mounts["config"]
    assert volumes["config"]["configMap"]["name"] == "vapipe-config"
    assert f"--from-file=configs/{config.name}" in MANIFEST.read_text()
    overrides = [words[i + 1] for i, word in enumerate(words) if word == "--set"]
    spec = load(str(REPO / "configs" / config.name), overrides)
    assert spec.settings.cluster == "ray"
    # Four shards to a GPU on workers that each offer one to Ray.
    wanted = spec.settings.shard_resources.num_gpus
    for group in job["spec"]["rayClusterSpec"]["workerGroupSpecs"]:
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        gpus = sum(int(v) for k, v in limits.items() if k.endswith("/gpu"))
        assert int(group["rayStartParams"]["num-gpus"]) == gpus > 0
        assert 0 < wanted <= gpus


def test_the_driver_has_every_variable_the_config_names() -> None:
    job = documents()["RayJob"]
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    given = {e["name"] for e in head.get("env", [])}
    text = (REPO / "configs" / "cluster.toml").read_text()
    named = {name for name, _ in ENV_PATTERN.findall(text)}
    assert named and named <= given


def test_the_images_are_built_with_the_ray_extra() -> None:
    text = MANIFEST.read_text()
    job = documents()["RayJob"]["spec"]["rayClusterSpec"]
    groups = [job["headGroupSpec"], *job["workerGroupSpecs"]]
    images = {g["template"]["spec"]["containers"][0]["image"] for g in groups}
    for image in images:
        name = image.split("/")[-1]
        line = rf"docker build -f (docker/\w+/Dockerfile) (.*) -t REGISTRY/{name} "
        built = re.search(line, text)
        assert built, f"no build line for {image}"
        assert "--build-arg EXTRAS=mqtt,ray" in built.group(2)
        assert "ARG EXTRAS=" in (REPO / built.group(1)).read_text()
