"""Checks rendered Kubernetes manifests (`kubectl kustomize` output) for what
the schemas cannot say: every container of every workload runs restricted,
and the toolhost Deployment drains before it is killed.

    python tests/deploy/check_workloads.py RENDERED.yaml...

Run by `cargo xtask test deploy` (xtask/src/deploy.rs) after
kubernetes-validate; exits 1 naming each object and field that fails.
"""

import re
import sys

import yaml

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

# The reply flush `serve` allows after the last outcome
# (toolhost::mcp::REPLY_FLUSH_LIMIT, 2 s).
REPLY_FLUSH_SECONDS = 2


def pod_spec(obj):
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "CronJob":
        spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    elif kind not in WORKLOADS:
        return None
    return (spec.get("template") or {}).get("spec") or {}


def effective(container, pod, key):
    """A securityContext field: the container's, else the pod's."""
    own = container.get("securityContext") or {}
    if key in own:
        return own[key]
    return (pod.get("securityContext") or {}).get(key)


def check_container(where, container, pod, problems):
    ctx = container.get("securityContext") or {}
    if effective(container, pod, "runAsNonRoot") is not True:
        problems.append(f"{where}: runAsNonRoot is not true")
    user = effective(container, pod, "runAsUser")
    if user is not None and user == 0:
        problems.append(f"{where}: runAsUser is 0")
    if ctx.get("readOnlyRootFilesystem") is not True:
        problems.append(f"{where}: securityContext.readOnlyRootFilesystem is not true")
    if ctx.get("allowPrivilegeEscalation") is not False:
        problems.append(f"{where}: securityContext.allowPrivilegeEscalation is not false")
    if ctx.get("privileged"):
        problems.append(f"{where}: securityContext.privileged is true")
    drop = (ctx.get("capabilities") or {}).get("drop") or []
    if "ALL" not in drop:
        problems.append(f"{where}: securityContext.capabilities.drop lacks ALL")
    if (ctx.get("capabilities") or {}).get("add"):
        problems.append(f"{where}: securityContext.capabilities.add is not empty")
    seccomp = effective(container, pod, "seccompProfile") or {}
    if seccomp.get("type") != "RuntimeDefault":
        problems.append(f"{where}: seccompProfile.type is not RuntimeDefault")
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        if "memory" not in (resources.get(part) or {}):
            problems.append(f"{where}: resources.{part}.memory is not set")


def seconds(duration):
    """`serve`'s durations as the Deployment passes them: 500ms, 20s, 1m."""
    match = re.fullmatch(r"(\d+)(ms|s|m)", duration)
    if not match:
        raise ValueError(f"cannot read the duration {duration!r}")
    value, unit = int(match.group(1)), match.group(2)
    return {"ms": value / 1000, "s": value, "m": value * 60}[unit]


def check_toolhost(where, pod, problems):
    """The toolhost container: probes on /healthz and /readyz, and a
    termination grace period longer than preStop + --grace + the flush."""
    containers = [c for c in pod.get("containers") or [] if c.get("name") == "toolhost"]
    if not containers:
        problems.append(f"{where}: no container named toolhost")
        return
    container = containers[0]
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        got = ((container.get(probe) or {}).get("httpGet") or {}).get("path")
        if got != path:
            problems.append(f"{where}: {probe} is not an httpGet of {path} (it is {got!r})")
    grace = 10  # serve's default --grace
    for arg in container.get("args") or []:
        if arg.startswith("--grace="):
            grace = seconds(arg.split("=", 1)[1])
    pre_stop = (((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}).get(
        "seconds", 0
    )
    needed = pre_stop + grace + REPLY_FLUSH_SECONDS
    period = pod.get("terminationGracePeriodSeconds", 30)
    if period <= needed:
        problems.append(
            f"{where}: terminationGracePeriodSeconds {period} is not above preStop {pre_stop}s"
            f" + --grace {grace}s + {REPLY_FLUSH_SECONDS}s of reply flush"
        )


def main(paths):
    problems = []
    workloads = 0
    for path in paths:
        with open(path, encoding="utf-8") as file:
            objects = [o for o in yaml.safe_load_all(file) if o]
        for obj in objects:
            pod = pod_spec(obj)
            if pod is None:
                continue
            workloads += 1
            name = f"{path}: {obj['kind']}/{obj['metadata']['name']}"
            for field in ("initContainers", "containers"):
                for container in pod.get(field) or []:
                    check_container(f"{name} {field}[{container.get('name')}]", container, pod, problems)
            if pod.get("automountServiceAccountToken") is not False:
                problems.append(f"{name}: automountServiceAccountToken is not false")
            if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "toolhost":
                check_toolhost(name, pod, problems)
    if workloads == 0:
        problems.append("no workload found in " + ", ".join(paths))
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        return 1
    print(f"{workloads} workloads in {len(paths)} files: every container runs restricted")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
