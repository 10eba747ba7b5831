#!/usr/bin/env python3
"""Consistency checks of a rendered idem manifest that no schema can express.

    check.py RENDERED.yaml VOTERS REGIONS

VOTERS: the number of nodes the overlay must run; REGIONS: their regions, e.g. "local:3" or
"eu:2,us:2,ap:1". Checks that every pod has its per-pod Service (named like the pod,
selecting it, publishing it before it is ready, with the API and Raft ports), that node
ids (ordinal + 1) are unique and exactly one pod has ordinal 0 (the bootstrapper), that each
StatefulSet's IDEM_REGION matches its nodeSelector, that TLS (both ports) and authentication
are on, with their files from the required Secrets idem-tls and idem-credentials, that the
governing Service is headless,
that the PodDisruptionBudget selects the nodes and keeps a majority, that the start script
in the ConfigMap is the one in base/, and that no Service is left without its pod.
Prints one line per problem and exits 1 if there is any.
"""

import pathlib
import sys

import yaml

HERE = pathlib.Path(__file__).resolve().parent


def env_value(container, name):
    for entry in container.get("env", []):
        if entry["name"] == name:
            return entry.get("value")
    return None


# TLS and authentication: the variable, and the file of the Secret it must name.
SECURE_ENV = {
    "IDEM_TLS_CERT": ("idem-tls", "tls.crt"),
    "IDEM_TLS_KEY": ("idem-tls", "tls.key"),
    "IDEM_PEER_TLS_CERT": ("idem-tls", "tls.crt"),
    "IDEM_PEER_TLS_KEY": ("idem-tls", "tls.key"),
    "IDEM_PEER_TLS_CA": ("idem-tls", "ca.crt"),
    "IDEMCTL_CACERT": ("idem-tls", "ca.crt"),
    "IDEM_AUTH_CREDENTIALS": ("idem-credentials", "credentials.toml"),
}


def secure_problems(name, template, container):
    """Each TLS and auth variable names a file that a required Secret volume mounts."""
    problems = []
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in template.get("volumes", [])}
    files = {}
    for volume_name, mount in mounts.items():
        secret = volumes.get(volume_name, {}).get("secret")
        if secret is None:
            continue
        if secret.get("optional"):
            problems.append(f"{name}: Secret {secret['secretName']} is optional; it must be required")
        keys = [item["path"] for item in secret.get("items", [])]
        for key in keys:
            files[f"{mount}/{key}"] = (secret["secretName"], key)
    for variable, wanted in SECURE_ENV.items():
        value = env_value(container, variable)
        if value is None:
            problems.append(f"{name}: {variable} is not set (TLS and authentication are on by default)")
        elif files.get(value) != wanted:
            problems.append(f"{name}: {variable}={value} is not {wanted[1]} of Secret {wanted[0]}")
    if env_value(container, "IDEM_AUTH") not in (None, "on"):
        problems.append(f"{name}: IDEM_AUTH turns authentication off")
    return problems


def main(path, voters, regions):
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    by_kind = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    problems = []
    services = by_kind.get("Service", {})
    pods, ids, per_region = [], {}, {}
    for name, sts in by_kind.get("StatefulSet", {}).items():
        spec = sts["spec"]
        start = spec.get("ordinals", {}).get("start", 0)
        template = spec["template"]["spec"]
        container = template["containers"][0]
        region = env_value(container, "IDEM_REGION")
        pinned = template.get("nodeSelector", {}).get("topology.kubernetes.io/region")
        if pinned is not None and pinned != region:
            problems.append(f"{name}: IDEM_REGION {region} but nodeSelector region {pinned}")
        governing = services.get(spec["serviceName"])
        if governing is None or governing["spec"].get("clusterIP") != "None":
            problems.append(f"{name}: serviceName {spec['serviceName']} is not a headless Service")
        problems.extend(secure_problems(name, template, container))
        probe = container.get("readinessProbe", {}).get("httpGet", {})
        if probe.get("path") != "/healthz":
            problems.append(f"{name}: readiness probe is not GET /healthz")
        for ordinal in range(start, start + spec["replicas"]):
            pod = f"{name}-{ordinal}"
            pods.append(pod)
            node_id = ordinal + 1
            if node_id in ids:
                problems.append(f"{pod}: node id {node_id} also used by {ids[node_id]}")
            ids[node_id] = pod
            per_region[region] = per_region.get(region, 0) + 1
            svc = services.get(pod)
            if svc is None:
                problems.append(f"{pod}: no Service named like the pod (its stable address)")
                continue
            if svc["spec"].get("selector") != {"statefulset.kubernetes.io/pod-name": pod}:
                problems.append(f"{pod}: its Service selects {svc['spec'].get('selector')}")
            if not svc["spec"].get("publishNotReadyAddresses"):
                problems.append(f"{pod}: its Service hides the pod until ready (joins would stall)")
            ports = {p["port"] for p in svc["spec"]["ports"]}
            if not {7400, 7410} <= ports:
                problems.append(f"{pod}: its Service lacks the API or Raft port ({sorted(ports)})")
    if len(pods) != voters:
        problems.append(f"{len(pods)} pods, expected {voters}")
    if 1000 in ids:
        problems.append("node id 1000 is the bootstrap seed's (idem-start.sh)")
    if sum(1 for p in pods if p.endswith("-0")) != 1:
        problems.append(f"exactly one pod must have ordinal 0 (the bootstrapper): {pods}")
    if per_region != regions:
        problems.append(f"pods per region {per_region}, expected {regions}")
    for name, svc in services.items():
        selector = svc["spec"].get("selector", {})
        pod = selector.get("statefulset.kubernetes.io/pod-name")
        if pod is not None and pod not in pods:
            problems.append(f"Service {name} selects pod {pod}, which no StatefulSet runs")
    pdbs = list(by_kind.get("PodDisruptionBudget", {}).values())
    if len(pdbs) != 1:
        problems.append(f"{len(pdbs)} PodDisruptionBudgets, expected 1")
    else:
        pdb = pdbs[0]["spec"]
        wanted = pdb["selector"]["matchLabels"].items()
        for name, sts in by_kind.get("StatefulSet", {}).items():
            labels = sts["spec"]["template"]["metadata"]["labels"]
            if not all(labels.get(k) == v for k, v in wanted):
                problems.append(f"the PodDisruptionBudget does not select {name}'s pods")
        least = pdb.get("minAvailable")
        if not isinstance(least, int) or not voters // 2 + 1 <= least < voters:
            problems.append(f"minAvailable {least}: must keep a majority of {voters} and allow one disruption")
    script = by_kind.get("ConfigMap", {}).get("idem-scripts", {}).get("data", {}).get("idem-start.sh")
    if script != (HERE / "base" / "idem-start.sh").read_text():
        problems.append("ConfigMap idem-scripts does not hold base/idem-start.sh")
    for problem in problems:
        print(f"{path}: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    wanted = {r.split(":")[0]: int(r.split(":")[1]) for r in sys.argv[3].split(",")}
    sys.exit(main(sys.argv[1], int(sys.argv[2]), wanted))
