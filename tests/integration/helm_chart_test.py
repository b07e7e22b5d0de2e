"""The Helm chart in examples/kubernetes/openlake/, rendered as `helm template` renders it.

Helm is not installed on these machines, so helm_render/main.go renders the chart: Go's
text/template with the functions the chart uses, each with Sprig's or Helm's meaning, and a
missing value key as an error. This test renders the chart with several sets of values and
checks what a cluster would be given:

- credentials: without values the chart's Secret generates each one (random, new on every
  `helm template`), keeps those an existing Secret of its name holds (Helm's lookup, injected
  here as a cluster would answer it on `helm upgrade`), and takes explicit values over both; with
  auth.existingSecret it makes none; NOTES.txt says how to read them and shows none;
- every document parses, and the objects fit together: the StatefulSet's serviceName is the
  headless Service, selectors match pod labels, one claim (or host path) per drive mounted where
  data_dirs says, probes run the ConfigMap's probe script on the admin port, every secretKeyRef
  names a key of the Secret, and no credential appears outside the Secret;
- every object's field names and types are those of the Kubernetes API (python3-kubernetes's
  models; skipped when it is not installed);
- the rendered openlaked.toml passes the daemon's own parser (`openlake disk info --config`)
  for every node id, and the parser still refuses a bad layout;
- the pod's command turns its name into OPENLAKE_SELF_ID, the probe script sends the admin
  token (with curl and with wget, against a stub listener), and a real openlaked started by that
  command, with the config moved to loopback, becomes ready through the probes.

Run by meson (suite integration, OPENLAKE_CLI and OPENLAKED set), or by hand:
    OPENLAKE_CLI=build/tools/openlake/openlake OPENLAKED=build/tools/openlaked/openlaked \\
        /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/integration/helm_chart_test.py
Exits 77 (skipped) without a Go toolchain.
"""

import base64
import copy
import hashlib
import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "examples/kubernetes/openlake"
RENDERER = Path(__file__).resolve().parent / "helm_render" / "main.go"

CREDS = {"auth": {"rpcSecret": "rpc-secret-3e9a1c5f", "adminToken": "admin-token-77d0b2e4",
                  "s3AccessKey": "OLTESTACCESSKEY42", "s3SecretKey": "s3-secret-key-c5f81e09"}}
SECRET_KEYS = {"rpcSecret": "rpc-secret", "adminToken": "admin-token",
               "s3AccessKey": "s3-access-key", "s3SecretKey": "s3-secret-key"}
NAMESPACE = "lakes"
# What the chart generates for a credential nobody gave: (length, alphabet).
ALNUM, UPPER_ALNUM = r"[A-Za-z0-9]", r"[A-Z0-9]"
GENERATED = {"rpc-secret": (40, ALNUM), "admin-token": (40, ALNUM),
             "s3-access-key": (20, UPPER_ALNUM), "s3-secret-key": (40, ALNUM)}

# Values merged over values.yaml (after CREDS unless creds is False), and the release name.
VARIANTS = {
    "defaults": {},
    "one-replica": {"set": {"replicas": 1}},
    "four-replicas-two-sets": {"set": {"replicas": 4, "drives": {"count": 8}}},
    "host-paths": {"set": {"drives": {"hostPaths": ["/mnt/nvme0/openlake", "/mnt/nvme1/openlake"],
                                      "setDriveCount": 2, "parityCount": 1}}},
    "gpu-nodes": {"set": {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "podAntiAffinity": "hard", "kv": {"capacityGb": 0.5},
        "resources": {"requests": {"cpu": "8", "memory": "24Gi"}, "limits": {"cpu": "8"}}}},
    "kv-only": {"set": {"s3": {"enabled": False}, "replicas": 2}},
    "s3-only": {"set": {"kv": {"enabled": False}}},
    "ram-fraction": {"set": {"kv": {"cpuRamFrac": 0.25},
                             "resources": {"limits": {"memory": "64Gi"}}}},
    "everything-on": {"set": {
        "service": {"enabled": True, "type": "LoadBalancer",
                    "annotations": {"example.com/lb": "internal"}},
        "metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}},
        "kv": {"socketHostPath": "/run/openlake"}, "config": {"cores": [2, 3]},
        "imagePullSecrets": [{"name": "regcred"}], "podAnnotations": {"example.com/team": "ml"},
        "podLabels": {"tier": "storage"}, "image": {"tag": "0.2.0-rc1"}}},
    "existing-secret": {"creds": False, "set": {"auth": {"existingSecret": "lake-creds"}}},
    "generated-credentials": {"creds": False},
    "long-release-name": {"name": "a-release-name-of-fifty-three-characters-for-the-test"},
}


def merge(dst: dict, over: dict) -> dict:
    """Helm's coalescing of user values over a chart's: maps merge, null deletes."""
    for k, v in over.items():
        if v is None:
            dst.pop(k, None)
        elif isinstance(v, dict) and isinstance(dst.get(k), dict):
            merge(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)
    return dst


class RenderError(Exception):
    pass


class Rendered:
    def __init__(self, out: dict, values: dict, name: str):
        self.values, self.name, self.notes = values, name, out["notes"]
        self.docs = []
        for _, text in sorted(out["manifests"].items()):
            for doc in yaml.safe_load_all(text):
                if doc is not None:
                    self.docs.append(doc)
        self.by_kind = {}
        for d in self.docs:
            self.by_kind.setdefault(d["kind"], []).append(d)

    def one(self, kind: str, name: str | None = None) -> dict:
        found = [d for d in self.by_kind.get(kind, [])
                 if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
        return found[0]

    @property
    def sts(self) -> dict:
        return self.one("StatefulSet")

    @property
    def pod(self) -> dict:
        return self.sts["spec"]["template"]["spec"]

    @property
    def container(self) -> dict:
        (c,) = self.pod["containers"]
        return c

    @property
    def config_text(self) -> str:
        return self.one("ConfigMap")["data"]["openlaked.toml"]

    @property
    def config(self) -> dict:
        return tomllib.loads(self.config_text)

    @property
    def secret_values(self) -> dict:
        """The chart's Secret, decoded; {} when it makes none."""
        if "Secret" not in self.by_kind:
            return {}
        return {k: base64.b64decode(x, validate=True).decode()
                for k, x in self.one("Secret")["data"].items()}


@pytest.fixture(scope="session", autouse=True)
def go_toolchain():
    # The one reason to skip: meson reads exit status 77 as a skip.
    if shutil.which("go") is None:
        pytest.exit("no Go toolchain (golang-go): skipped", returncode=77)


@pytest.fixture(scope="session")
def renderer(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("helm")
    env = dict(os.environ, GOCACHE=os.environ.get("HELM_RENDER_GOCACHE", str(tmp / "gocache")),
               GOPATH=str(tmp / "gopath"), GO111MODULE="off", GOPROXY="off", GOFLAGS="",
               GOTOOLCHAIN="local", CGO_ENABLED="0")
    exe = tmp / "helm_render"
    subprocess.run(["go", "build", "-o", str(exe), str(RENDERER)], env=env, check=True,
                   cwd=RENDERER.parent)
    chart_json, values_json = tmp / "chart.json", tmp / "values.json"
    chart_json.write_text(json.dumps(yaml.safe_load((CHART / "Chart.yaml").read_text())))
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    values_json.write_text(json.dumps(defaults))

    lookups = iter(range(1 << 30))

    def render(*overrides: dict, name: str = "lake", lookup: dict | None = None) -> Rendered:
        """lookup: what Helm's lookup finds, {"v1/Secret/<ns>/<name>": object} (default none,
        as under `helm template`)."""
        cmd = [str(exe), "-chart", str(CHART), "-chart-json", str(chart_json),
               "-values-json", str(values_json), "-name", name, "-namespace", NAMESPACE, "-json"]
        if lookup is not None:
            objects = tmp / f"lookup-{next(lookups)}.json"
            objects.write_text(json.dumps(lookup))
            cmd += ["-lookup", str(objects)]
        values = copy.deepcopy(defaults)
        for o in overrides:
            cmd += ["-set-json", json.dumps(o)]
            merge(values, o)
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RenderError(p.stderr.strip())
        return Rendered(json.loads(p.stdout), values, name)

    return render


def render_variant(renderer, variant: str) -> Rendered:
    v = VARIANTS[variant]
    overrides = ([CREDS] if v.get("creds", True) else []) + [v.get("set", {})]
    return renderer(*overrides, name=v.get("name", "lake"))


def tool(env_name: str, rel: str) -> str | None:
    for path in (os.environ.get(env_name), ROOT / "build" / rel, ROOT / "build-bench" / rel):
        if path and os.access(path, os.X_OK):
            return str(Path(path).resolve())
    return None


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports: every socket stays bound until all are chosen, so the
    kernel cannot hand the same port out twice."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# --- credentials ---------------------------------------------------------------------------

def existing_secret(data: dict, name: str = "lake-openlake", namespace: str = NAMESPACE) -> dict:
    """Helm's lookup of the chart's Secret, as the API server answers it: data base64-encoded."""
    return {f"v1/Secret/{namespace}/{name}": {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace,
                     "annotations": {"helm.sh/resource-policy": "keep"}},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}}


def assert_generated(key: str, value: str) -> None:
    length, alphabet = GENERATED[key]
    assert re.fullmatch(f"{alphabet}{{{length}}}", value), f"{key}: {value!r}"


def assert_not_shown(r: Rendered, values) -> None:
    """No credential anywhere but the Secret: not in another object, not in NOTES.txt."""
    others = json.dumps([d for d in r.docs if d["kind"] != "Secret"]) + r.notes
    for value in values:
        assert value not in others


def test_defaults_generate_credentials(renderer):
    # `helm install` with no value set: a Secret with a random value for each key, kept when the
    # release is uninstalled (the claims, and the objects signed with the S3 keys, stay too).
    r = renderer()
    secret = r.one("Secret", "lake-openlake")
    assert secret["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert secret["type"] == "Opaque"
    first = r.secret_values
    assert set(first) == set(GENERATED)
    for key, value in first.items():
        assert_generated(key, value)
    assert_not_shown(r, first.values())
    # NOTES.txt says where they are and how to read each.
    for key in GENERATED:
        assert (f"kubectl get secret lake-openlake -n {NAMESPACE} -o jsonpath='{{.data.{key}}}'"
                " | base64 -d") in r.notes

    # Each render (each `helm template`, each install) makes new ones; the config, its checksum
    # and so the pods' template stay the same.
    again = renderer()
    assert all(again.secret_values[k] != first[k] for k in GENERATED)
    assert len(set(first.values()) | set(again.secret_values.values())) == 2 * len(GENERATED)
    assert again.config_text == r.config_text
    assert again.sts == r.sts


def test_s3_keys_not_made_without_s3(renderer):
    r = renderer({"s3": {"enabled": False}})
    assert set(r.secret_values) == {"rpc-secret", "admin-token"}
    assert "s3-access-key" not in r.notes


def test_upgrade_keeps_the_secret_it_made(renderer):
    # `helm upgrade`: lookup finds the Secret the install made, and every value is reused as is.
    stored = renderer().secret_values
    r = renderer(lookup=existing_secret(stored))
    assert r.secret_values == stored
    assert r.one("Secret")["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    # A key the old Secret lacks (S3 turned on later) is generated; the rest are kept.
    kv_only = {k: stored[k] for k in ("rpc-secret", "admin-token")}
    r = renderer(lookup=existing_secret(kv_only))
    assert {k: r.secret_values[k] for k in kv_only} == kv_only
    for key in ("s3-access-key", "s3-secret-key"):
        assert_generated(key, r.secret_values[key])
        assert r.secret_values[key] != stored[key]
    # Only the release's own Secret counts: another name or namespace is not looked at.
    for elsewhere in (existing_secret(stored, name="other-openlake"),
                      existing_secret(stored, namespace="default")):
        fresh = renderer(lookup=elsewhere).secret_values
        assert not set(fresh.values()) & set(stored.values())


@pytest.mark.parametrize("field", sorted(SECRET_KEYS))
def test_explicit_values_win(renderer, field):
    key, given = SECRET_KEYS[field], CREDS["auth"][field]
    stored = {k: f"stored-{k}" for k in GENERATED}
    # Over what the Secret holds: the given value replaces it, the others are kept.
    r = renderer({"auth": {field: given}}, lookup=existing_secret(stored))
    assert r.secret_values == stored | {key: given}
    # Without a Secret: the given value, the others generated.
    r = renderer({"auth": {field: given}})
    assert r.secret_values[key] == given
    for k, value in r.secret_values.items():
        if k != key:
            assert_generated(k, value)
    assert_not_shown(r, r.secret_values.values())


def test_all_explicit_values(renderer):
    r = renderer(CREDS, lookup=existing_secret({k: f"stored-{k}" for k in GENERATED}))
    assert r.secret_values == {SECRET_KEYS[f]: v for f, v in CREDS["auth"].items()}


def test_existing_secret_makes_none(renderer):
    # The user's Secret: the chart makes none, generates nothing and looks nothing up, even
    # where auth.* has values or a Secret of the chart's own name exists.
    for extra in ({}, CREDS):
        r = renderer(extra, {"auth": {"existingSecret": "lake-creds"}},
                     lookup=existing_secret({k: f"stored-{k}" for k in GENERATED}))
        assert "Secret" not in r.by_kind
        refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in r.container["env"]
                if "secretKeyRef" in e.get("valueFrom", {})}
        assert refs == {"lake-creds"}
        assert "kubectl get secret lake-creds" in r.notes
        assert_not_shown(r, CREDS["auth"].values())


# --- the objects, for every variant --------------------------------------------------------

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def gib(quantity: str) -> float:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(Mi|Gi|Ti)", quantity)
    assert m, f"unexpected memory quantity {quantity}"
    return float(m[1]) * {"Mi": 1 / 1024, "Gi": 1, "Ti": 1024}[m[2]]


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_objects_fit_together(renderer, variant):
    r = render_variant(renderer, variant)
    v, sts, pod, c, cfg = r.values, r.sts, r.pod, r.container, r.config
    s3, kv = v["s3"]["enabled"], v["kv"]["enabled"]
    replicas = v["replicas"]

    expected = {"ConfigMap", "Service", "StatefulSet", "PodDisruptionBudget"}
    if not v["auth"]["existingSecret"]:
        expected.add("Secret")
    if v["metrics"]["serviceMonitor"]["enabled"]:
        expected.add("ServiceMonitor")
    assert set(r.by_kind) == expected
    assert len(r.by_kind["Service"]) == (2 if v["service"]["enabled"] else 1)

    selector = sts["spec"]["selector"]["matchLabels"]
    assert selector == {"app.kubernetes.io/name": "openlake", "app.kubernetes.io/instance": r.name}
    for d in r.docs:
        md = d["metadata"]
        assert len(md["name"]) <= 63 and DNS_LABEL.match(md["name"]), md["name"]
        assert md["namespace"] == NAMESPACE
        assert selector.items() <= md["labels"].items(), d["kind"]
        for value in md["labels"].values():
            assert len(value) <= 63 and LABEL_VALUE.match(value), value
    fullname = sts["metadata"]["name"]
    # The StatefulSet's pods carry controller-revision-hash = <name>-<10 characters>.
    assert len(fullname) + 11 <= 63

    # The headless Service names the pods; the StatefulSet points at it.
    (headless,) = [s for s in r.by_kind["Service"] if s["spec"].get("clusterIP") == "None"]
    assert sts["spec"]["serviceName"] == headless["metadata"]["name"]
    assert headless["spec"]["publishNotReadyAddresses"] is True
    assert sts["spec"]["replicas"] == replicas
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert selector.items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    for s in r.by_kind["Service"]:
        assert s["spec"]["selector"] == selector
    assert r.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector

    # Ports: named on the container, targeted by name, and where the config listens.
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"rpc": v["ports"]["rpc"], "admin": v["ports"]["admin"],
                     **({"s3": v["ports"]["s3"]} if s3 else {})}
    for s in r.by_kind["Service"]:
        for p in s["spec"]["ports"]:
            assert p["targetPort"] in ports and p["port"] == ports[p["targetPort"]]
    assert cfg["rpc_addr"] == f"0.0.0.0:{ports['rpc']}"
    assert cfg["admin_addr"] == f"0.0.0.0:{ports['admin']}"
    if s3:
        assert cfg["s3_addr"] == f"0.0.0.0:{ports['s3']}"

    # The config: mode, the nodes list from replicas, the slab; no secret in it.
    assert cfg["mode"] == ("storage" if s3 else "kv")
    assert cfg["self_id"] == 0
    drives = len(v["drives"]["hostPaths"]) or v["drives"]["count"]
    if s3:
        assert cfg["nodes"] == [
            {"id": i, "disk_count": drives,
             "rpc_addr": f"{fullname}-{i}.{headless['metadata']['name']}.{NAMESPACE}"
                         f".svc.cluster.local:{ports['rpc']}"}
            for i in range(replicas)]
        assert cfg["set_drive_count"] == v["drives"]["setDriveCount"]
        assert cfg["default_parity_count"] == v["drives"]["parityCount"]
    else:
        assert "nodes" not in cfg and "data_dirs" not in cfg  # mode "kv": one entry at most
    if kv:
        slab = cfg["kv_slab"]
        if v["kv"]["cpuRamFrac"]:
            assert slab["cpu_ram_frac"] == v["kv"]["cpuRamFrac"] and "capacity_gb" not in slab
        else:
            assert slab["capacity_gb"] == v["kv"]["capacityGb"]
    else:
        assert "kv_slab" not in cfg
    for key in ("rpc_secret", "admin_token", "credentials"):
        assert key not in cfg
    annotations = sts["spec"]["template"]["metadata"]["annotations"]
    assert annotations["checksum/config"] == hashlib.sha256(
        r.config_text.removesuffix("\n").encode()).hexdigest()

    # Drives: data_dirs are the mounts of data-0.., each a claim or a host path.
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {vol["name"]: vol for vol in pod["volumes"]}
    claims = [t["metadata"]["name"] for t in sts["spec"].get("volumeClaimTemplates", [])]
    assert set(mounts) <= set(volumes) | set(claims)
    data = [f"data-{i}" for i in range(drives)] if s3 else []
    assert cfg.get("data_dirs", []) == [mounts[n] for n in data]
    assert sorted(n for n in mounts if n.startswith("data-")) == sorted(data)
    if v["drives"]["hostPaths"] or v["kv"]["socketHostPath"] or v["podAntiAffinity"] == "hard":
        # Pods that share node folders never share a node.
        anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert anti == [{"topologyKey": "kubernetes.io/hostname",
                         "labelSelector": {"matchLabels": selector}}]
    if v["drives"]["hostPaths"]:
        assert claims == []
        assert [volumes[n]["hostPath"] for n in data] == [
            {"path": p, "type": "Directory"} for p in v["drives"]["hostPaths"]]
    else:
        assert claims == data
        for t in sts["spec"].get("volumeClaimTemplates", []):
            size = t["spec"]["resources"]["requests"]["storage"]
            assert size == v["drives"]["persistence"]["size"]
    assert mounts["config"] == "/etc/openlake"
    assert volumes["config"]["configMap"]["name"] == r.one("ConfigMap")["metadata"]["name"]
    assert cfg["kv_socket"].startswith(mounts["run"] + "/")
    if v["kv"]["socketHostPath"]:
        assert volumes["run"]["hostPath"]["path"] == v["kv"]["socketHostPath"]

    # Credentials: env from the Secret's keys, the ordinal from the pod's name.
    env = {e["name"]: e for e in c["env"]}
    assert env["OPENLAKE_POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    refs = {n: e["valueFrom"]["secretKeyRef"] for n, e in env.items()
            if "secretKeyRef" in e.get("valueFrom", {})}
    wanted = {"OPENLAKE_RPC_SECRET": "rpc-secret", "OPENLAKE_ADMIN_TOKEN": "admin-token"}
    if s3:
        wanted |= {"OPENLAKE_S3_ACCESS_KEY": "s3-access-key",
                   "OPENLAKE_S3_SECRET_KEY": "s3-secret-key"}
    assert {n: ref["key"] for n, ref in refs.items()} == wanted
    secret_name = v["auth"]["existingSecret"] or fullname
    assert {ref["name"] for ref in refs.values()} == {secret_name}
    if "Secret" in r.by_kind:
        secret = r.one("Secret", secret_name)
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert set(secret["data"]) == set(wanted.values())
        for field, key in SECRET_KEYS.items():
            if key not in secret["data"]:
                continue
            if v["auth"][field]:
                assert r.secret_values[key] == v["auth"][field]
            else:
                assert_generated(key, r.secret_values[key])
    assert_not_shown(r, [*CREDS["auth"].values(), *r.secret_values.values()])

    # Probes: the ConfigMap's script, against the admin port.
    probe_script = r.one("ConfigMap")["data"]["probe.sh"]
    assert f"http://127.0.0.1:{ports['admin']}$1" in probe_script
    for probe, path in (("startupProbe", "/health/live"), ("livenessProbe", "/health/live"),
                        ("readinessProbe", "/health/ready")):
        assert c[probe]["exec"]["command"] == ["/bin/sh", "/etc/openlake/probe.sh", path]
        assert c[probe]["timeoutSeconds"] >= 5 and c[probe]["periodSeconds"] >= 1

    # Hardening.
    psc = pod["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] > 0
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False

    # Memory: the slab fits in what the pod asks for, and is not overcommitted.
    res, asked = c["resources"], v["resources"]
    if "memory" in asked["requests"] or "memory" in asked["limits"]:
        for kind in ("requests", "limits"):
            assert (res[kind] or {}).get("memory") == asked[kind].get("memory")
    elif kv and v["kv"]["cpuRamFrac"]:
        assert "memory" not in (res["limits"] or {})
    else:
        assert res["requests"]["memory"] == res["limits"]["memory"]
        slab = v["kv"]["capacityGb"] if kv else 0
        assert gib(res["limits"]["memory"]) >= slab + v["memoryOverheadGb"]
    # Placement and the pass-through values.
    assert pod.get("nodeSelector", {}) == v["nodeSelector"]
    assert pod.get("tolerations", []) == v["tolerations"]
    assert pod.get("imagePullSecrets", []) == v["imagePullSecrets"]
    assert v["podLabels"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    assert v["podAnnotations"].items() <= annotations.items()
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert c["image"] == f"{v['image']['repository']}:{v['image']['tag'] or app_version}"

    if "ServiceMonitor" in r.by_kind:
        sm = r.one("ServiceMonitor")
        selects = sm["spec"]["selector"]["matchLabels"].items()
        assert selects <= headless["metadata"]["labels"].items()
        (ep,) = sm["spec"]["endpoints"]
        assert ep["port"] == "admin" and ep["path"] == "/metrics"
        assert ep["authorization"]["credentials"] == {"name": secret_name, "key": "admin-token"}
    if v["metrics"]["podAnnotations"]:
        assert annotations["prometheus.io/port"] == str(ports["admin"])
    assert f"{fullname}-0" in r.notes


# --- against the Kubernetes API's schema ---------------------------------------------------

MODELS = {("v1", "ConfigMap"): "V1ConfigMap", ("v1", "Secret"): "V1Secret",
          ("v1", "Service"): "V1Service", ("apps/v1", "StatefulSet"): "V1StatefulSet",
          ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget"}


def check_fields(value, type_name: str, path: str, models) -> None:
    """Field names and types as the API defines them (a typo like readinessProbes fails)."""
    if value is None or type_name == "object":
        return
    if type_name.startswith("list["):
        assert isinstance(value, list), f"{path}: expected a list"
        for i, item in enumerate(value):
            check_fields(item, type_name[5:-1], f"{path}[{i}]", models)
    elif type_name.startswith("dict("):
        assert isinstance(value, dict), f"{path}: expected a map"
        inner = type_name[5:-1].split(", ", 1)[1]
        for k, item in value.items():
            check_fields(item, inner, f"{path}.{k}", models)
    elif type_name in ("str", "datetime", "date"):
        assert isinstance(value, str), f"{path}: expected a string, got {value!r}"
    elif type_name == "int":
        assert isinstance(value, int) and not isinstance(value, bool), f"{path}: expected an int"
    elif type_name == "float":
        assert isinstance(value, (int, float)) and not isinstance(value, bool), path
    elif type_name == "bool":
        assert isinstance(value, bool), f"{path}: expected a bool, got {value!r}"
    else:
        model = getattr(models, type_name)
        assert isinstance(value, dict), f"{path}: expected a {type_name}"
        by_json = {j: a for a, j in model.attribute_map.items()}
        for k, item in value.items():
            assert k in by_json, f"{path}: {type_name} has no field {k!r}"
            check_fields(item, model.openapi_types[by_json[k]], f"{path}.{k}", models)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_objects_match_the_kubernetes_api(renderer, variant):
    kubernetes = pytest.importorskip("kubernetes", reason="python3-kubernetes not installed")
    models = kubernetes.client.models
    api = kubernetes.client.ApiClient()
    r = render_variant(renderer, variant)
    for d in r.docs:
        key = (d["apiVersion"], d["kind"])
        if key == ("monitoring.coreos.com/v1", "ServiceMonitor"):
            continue  # a CRD: not in the client's models
        where = f"{d['kind']}/{d['metadata']['name']}"
        check_fields(d, MODELS[key], where, models)
        # Deserialising checks the required fields (a container without a name, ...).
        api._ApiClient__deserialize(d, MODELS[key])


# --- the config through the daemon's parser ------------------------------------------------

@pytest.fixture(scope="session")
def cli():
    path = tool("OPENLAKE_CLI", "tools/openlake/openlake")
    if path is None:
        pytest.skip("the openlake CLI is not built (set OPENLAKE_CLI)")
    return path


def disk_info(cli: str, text: str, tmp_path: Path, self_id: int) -> subprocess.CompletedProcess:
    cfg = tmp_path / f"node{self_id}.toml"
    cfg.write_text(re.sub(r"(?m)^self_id = 0$", f"self_id = {self_id}", text, count=1))
    return subprocess.run([cli, "disk", "info", "--config", str(cfg), "--json"],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_config_passes_the_parser(renderer, cli, tmp_path, variant):
    r = render_variant(renderer, variant)
    # Every pod's view: its ordinal as self_id, which must be one of the nodes.
    for self_id in range(r.values["replicas"]):
        p = disk_info(cli, r.config_text, tmp_path, self_id)
        assert p.returncode in (0, 1), f"self_id {self_id}: {p.stderr}"
        if p.returncode == 0:
            report = json.loads(p.stdout)
            assert [d["path"] for d in report["drives"]] == r.config.get("data_dirs", [])


def test_parser_refuses_what_it_should(renderer, cli, tmp_path):
    # The check above would notice a config the daemon rejects: these are rejected.
    r = renderer(CREDS, {"drives": {"parityCount": 3}})
    p = disk_info(cli, r.config_text, tmp_path, 0)
    assert p.returncode == 2 and "default_parity_count" in p.stderr, p.stderr
    r = renderer(CREDS, {"replicas": 2})
    p = disk_info(cli, r.config_text, tmp_path, 2)
    assert p.returncode == 2 and "self_id 2" in p.stderr, p.stderr


def test_chart_refuses_nonsense(renderer):
    with pytest.raises(RenderError, match="would serve nothing"):
        renderer(CREDS, {"kv": {"enabled": False}, "s3": {"enabled": False}})
    with pytest.raises(RenderError, match="podAntiAffinity"):
        renderer(CREDS, {"podAntiAffinity": "Hard"})
    with pytest.raises(RenderError, match="at least one drive"):
        renderer(CREDS, {"drives": {"count": 0}})


# --- the pod's command and probes, run ------------------------------------------------------

def test_pod_command_passes_the_ordinal(renderer, tmp_path):
    c = renderer(CREDS).container
    fake = tmp_path / "openlaked"
    fake.write_text('#!/bin/sh\necho "id=$OPENLAKE_SELF_ID args=$*"\n')
    fake.chmod(0o755)
    for pod, ordinal in (("lake-openlake-0", "0"), ("my-big-lake-openlake-12", "12")):
        out = subprocess.run(c["command"], capture_output=True, text=True, check=True,
                             env={"PATH": f"{tmp_path}:/usr/bin:/bin", "OPENLAKE_POD_NAME": pod})
        assert out.stdout == f"id={ordinal} args=--config /etc/openlake/openlaked.toml\n"


class StubAdmin(http.server.BaseHTTPRequestHandler):
    token = ""
    ready = True

    def do_GET(self):
        if self.headers.get("Authorization") != f"Bearer {self.token}":
            code = 401
        elif self.path == "/health/live":
            code = 200
        elif self.path == "/health/ready":
            code = 200 if StubAdmin.ready else 503
        else:
            code = 404
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def probe_env(tmp_path: Path, client: str | None, token: str) -> dict:
    """An environment whose PATH offers only `client` (curl, wget or nothing) besides sh."""
    bin_dir = tmp_path / f"bin-{client}"
    bin_dir.mkdir(exist_ok=True)
    if client and not (bin_dir / client).exists():
        (bin_dir / client).symlink_to(shutil.which(client))
    return {"PATH": str(bin_dir), "OPENLAKE_ADMIN_TOKEN": token}


@pytest.mark.parametrize("client", ["curl", "wget"])
def test_probe_script_sends_the_token(renderer, tmp_path, client):
    if shutil.which(client) is None:
        pytest.skip(f"no {client} here")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), StubAdmin)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        StubAdmin.token = CREDS["auth"]["adminToken"]
        r = renderer(CREDS, {"ports": {"admin": server.server_address[1]}})
        script = tmp_path / "probe.sh"
        script.write_text(r.one("ConfigMap")["data"]["probe.sh"])

        def probe(path: str, token: str = StubAdmin.token, tool_name: str | None = client) -> int:
            return subprocess.run(["/bin/sh", str(script), path], capture_output=True,
                                  env=probe_env(tmp_path, tool_name, token), timeout=10).returncode

        StubAdmin.ready = True
        assert probe("/health/live") == 0
        assert probe("/health/ready") == 0
        assert probe("/health/live", token="wrong") != 0
        StubAdmin.ready = False
        assert probe("/health/ready") != 0
        assert probe("/health/live", tool_name=None) != 0  # neither tool: fails, never passes
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("creds", ["given", "generated"])
def test_real_daemon_becomes_ready_through_the_probes(renderer, tmp_path, creds):
    """The pods' command and env, run here: every replica a real openlaked with the rendered
    config on loopback (each pod's ports its own, its peers' names their loopback addresses), the
    credentials given in values or generated by the chart. Together they form one object store:
    each pod is ready only once the cluster has come together."""
    openlaked = tool("OPENLAKED", "tools/openlaked/openlaked")
    if openlaked is None:
        pytest.skip("openlaked is not built (set OPENLAKED)")
    client = next((t for t in ("curl", "wget") if shutil.which(t)), None)
    if client is None:
        pytest.skip("neither curl nor wget here")
    base = dict(zip(("rpc", "s3", "admin"), free_ports(3)))
    r = renderer(*([CREDS] if creds == "given" else []),
                 {"ports": base, "kv": {"capacityGb": 0.0625, "segmentMb": 4}})
    replicas = r.values["replicas"]
    pods = [dict(zip(("rpc", "s3", "admin"), free_ports(3))) for _ in range(replicas)]
    secret = r.secret_values
    if creds == "given":
        assert secret["admin-token"] == CREDS["auth"]["adminToken"]
    name = r.sts["metadata"]["name"]

    def pod_config(i: int) -> str:
        text = r.config_text.replace('"0.0.0.0:', '"127.0.0.1:')
        for what in ("rpc", "s3", "admin"):
            text = text.replace(f'127.0.0.1:{base[what]}"', f'127.0.0.1:{pods[i][what]}"')
        # The peers' stable names (<sts>-<j>.<headless>...:<rpc>) become their loopback ports.
        text = re.sub(rf'"{re.escape(name)}-(\d+)\.[^"]*:{base["rpc"]}"',
                      lambda m: f'"127.0.0.1:{pods[int(m.group(1))]["rpc"]}"', text)
        text = text.replace('"/data/', f'"{tmp_path}/pod{i}/data/')
        return text.replace('"/run/openlake/', f'"{tmp_path}/pod{i}/run/')

    daemons, logs, scripts = [], [], []
    for i in range(replicas):
        root = tmp_path / f"pod{i}"
        (root / "run").mkdir(parents=True, mode=0o700)
        cfg = root / "openlaked.toml"
        cfg.write_text(pod_config(i))
        script = root / "probe.sh"
        script.write_text(r.one("ConfigMap")["data"]["probe.sh"].replace(
            str(base["admin"]), str(pods[i]["admin"])))
        scripts.append(script)
        env = {"PATH": f"{Path(openlaked).parent}:/usr/bin:/bin",
               "OPENLAKE_POD_NAME": f"{name}-{i}"}
        for e in r.container["env"]:
            if "secretKeyRef" in e.get("valueFrom", {}):
                env[e["name"]] = secret[e["valueFrom"]["secretKeyRef"]["key"]]
        command = [a.replace("/etc/openlake/openlaked.toml", str(cfg))
                   for a in r.container["command"]]
        log = root / "openlaked.log"
        logs.append(log)
        with open(log, "w") as out:
            daemons.append(subprocess.Popen(command, env=env, stdout=out,
                                            stderr=subprocess.STDOUT, cwd=root,
                                            start_new_session=True))

    def probe(i: int, path: str, token: str = secret["admin-token"]) -> int:
        return subprocess.run(["/bin/sh", str(scripts[i]), path], capture_output=True,
                              timeout=10, env=probe_env(tmp_path, client, token)).returncode

    def all_logs() -> str:
        return "\n".join(f"--- pod {i}\n{log.read_text()}" for i, log in enumerate(logs))

    try:
        deadline = time.monotonic() + 60
        for i in range(replicas):
            while probe(i, "/health/ready") != 0:
                assert daemons[i].poll() is None, \
                    f"pod {i}'s openlaked exited {daemons[i].returncode}:\n{all_logs()}"
                assert time.monotonic() < deadline, f"pod {i} never ready:\n{all_logs()}"
                time.sleep(0.2)
        assert probe(0, "/health/live") == 0
        # The token came from OPENLAKE_ADMIN_TOKEN (the Secret), not the file: without it, 401.
        assert probe(0, "/health/live", token="not-the-token") != 0, \
            "openlaked did not take admin_token from OPENLAKE_ADMIN_TOKEN (built before that?)"
        # One deployment over every pod's drives, each drive knowing its pod.
        ids = set()
        for i in range(replicas):
            drives = sorted((tmp_path / f"pod{i}" / "data").iterdir())
            assert [p.name for p in drives] == ["d0", "d1", "d2", "d3"]
            for d in drives:
                fmt = json.loads((d / ".openlake.sys" / "format.json").read_text())
                assert fmt["node_id"] == i
                ids.add(fmt["deployment_id"])
        assert len(ids) == 1
        # The S3 key pair came from the environment too: none was generated.
        assert "generated" not in all_logs()
    finally:
        for daemon in daemons:
            # A daemon that already exited (and was reaped by poll) has no process group left
            # to signal; the assertion above then carries its log, which killpg must not hide.
            if daemon.poll() is None:
                os.killpg(daemon.pid, signal.SIGTERM)
        for daemon in daemons:
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(daemon.pid, signal.SIGKILL)
                daemon.wait()
    for i, daemon in enumerate(daemons):
        assert daemon.returncode == 0, f"pod {i}:\n{all_logs()}"
