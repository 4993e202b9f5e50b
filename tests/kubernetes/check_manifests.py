#!/usr/bin/env python3
"""Offline check that the manifests of a kustomization are valid Kubernetes objects.

    check_manifests.py DIR        (DIR/kustomization.yaml and the resources it lists)

The schema: the Kubernetes API's own OpenAPI types, as the official Python client generates them
(Debian's python3-kubernetes: kubernetes.client.models, one class per API type, with the JSON
name and the type of every field). Each object is looked up by apiVersion and kind (apps/v1
DaemonSet -> V1DaemonSet, v1 Namespace -> V1Namespace, ...) and walked field by field:
- a field its type does not have is an error (what `kubectl apply --validate=strict` rejects:
  a typo such as `hostPid`, `volumeMount`, a key at the wrong level);
- each value must have the field's type: object, list, map of strings, string, integer, boolean
  (quantities like 32Mi are strings; IntOrString fields take both);
- the fields the API requires must be there (the client's models refuse to build without them:
  a container's name, a DaemonSet's selector and template, a hostPath's path, ...);
and a few rules the API server enforces beyond the schema (apps/v1 validation): the selector
matches the template's labels, every volumeMount names a volume of the pod, names are DNS
labels, hostPath paths are absolute, container names are unique, and the kustomization's own
keys, resources, namespace and images entries. One rule the kubelet enforces at the pod's start:
a configMap volume (not optional) names a ConfigMap of the kustomization that has every key its
items project (else the pod stays in ContainerCreating: "configmap not found", "configmap
references non-existent config key").
Exit 0 valid, 1 invalid (every problem printed as FILE: PATH: problem), 2 usage.
"""
import difflib
import os
import re
import sys

import yaml

try:
    from kubernetes.client import models
    from kubernetes.client.api_client import ApiClient
except ImportError:  # pragma: no cover
    print("check_manifests: python3-kubernetes is not installed (.ci/install-deps)", file=sys.stderr)
    sys.exit(2)

PRIMITIVE = {"str": str, "int": int, "bool": bool, "float": (int, float)}
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
KUSTOMIZATION_KEYS = {"apiVersion", "kind", "namespace", "resources", "images", "commonLabels",
                      "labels", "namePrefix", "nameSuffix", "patches", "configMapGenerator"}


# NVIDIA GPU Operator's ClusterPolicy (nvidia.com/v1, cluster-scoped), which the Python client has
# no model of: the top-level spec fields of its ClusterPolicySpec (NVIDIA/gpu-operator,
# api/nvidia/v1/clusterpolicy_types.go), each a component spec that is a mapping. Its contents
# are the operator's to check; the rules here are the ones hostprep needs beside it
# (README, "Deploying beside the GPU Operator"): sandbox workloads on, the operator's own agents
# that move GPUs between drivers (vfioManager, vgpuDeviceManager) off, the sandbox device plugin
# and the validator kept.
CLUSTER_POLICY_SPEC = {
    "operator", "daemonsets", "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter",
    "nodeStatusExporter", "gfd", "migManager", "mig", "psp", "psa", "validator", "gds",
    "gdrcopy", "vgpuManager", "vgpuDeviceManager", "sandboxWorkloads", "vfioManager",
    "sandboxDevicePlugin", "kataManager", "ccManager", "cdi", "hostPaths",
}
CLUSTER_POLICY_RULES = [
    (("sandboxWorkloads", "enabled"), True, "hostprep's workload label is read only with it"),
    (("vfioManager", "enabled"), False, "hostprep binds vfio-pci: one owner per GPU"),
    (("vgpuDeviceManager", "enabled"), False, "hostprep makes the vGPU devices: one owner per GPU"),
    (("sandboxDevicePlugin", "enabled"), True, "it advertises the GPUs hostprep prepares"),
]


def model_class(api_version, kind):
    group_version = api_version.split("/")
    version = group_version[-1]
    group = group_version[0] if len(group_version) == 2 else ""
    prefix = {"": "", "apps": "", "batch": "", "rbac.authorization.k8s.io": "",
              "policy": "", "scheduling.k8s.io": ""}.get(group)
    if prefix is None:
        return None
    return getattr(models, version.capitalize() + kind, None)


class Checker:
    def __init__(self):
        self.errors = []
        self.configmaps = {}   # name -> the keys of its data and binaryData
        self.cm_refs = []      # (where, path, configMap volume source)

    def err(self, where, path, msg):
        self.errors.append(f"{where}: {path or '.'}: {msg}")

    def walk(self, where, path, value, typ):
        if typ == "object":  # IntOrString, RawExtension: anything
            return
        if typ in PRIMITIVE:
            if typ == "str" and isinstance(value, str):
                return
            if typ != "str" and isinstance(value, PRIMITIVE[typ]) and not (
                    typ != "bool" and isinstance(value, bool)):
                return
            self.err(where, path, f"{value!r} is not {'an' if typ == 'int' else 'a'} {typ}")
            return
        if typ == "datetime":
            return
        m = re.fullmatch(r"list\[(.*)\]", typ)
        if m:
            if not isinstance(value, list):
                self.err(where, path, f"not a list ({typ})")
                return
            for i, v in enumerate(value):
                self.walk(where, f"{path}[{i}]", v, m.group(1))
            return
        m = re.fullmatch(r"dict\(str, (.*)\)", typ)
        if m:
            if not isinstance(value, dict):
                self.err(where, path, f"not a map ({typ})")
                return
            for k, v in value.items():
                if not isinstance(k, str):
                    self.err(where, path, f"key {k!r} is not a string")
                # Quantities (resources) are strings in the schema; YAML may give numbers.
                if m.group(1) == "str" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    continue
                self.walk(where, f"{path}.{k}", v, m.group(1))
            return
        cls = getattr(models, typ, None)
        if cls is None:
            self.err(where, path, f"unknown type {typ}")
            return
        if not isinstance(value, dict):
            self.err(where, path, f"not an object ({typ})")
            return
        by_json = {j: a for a, j in cls.attribute_map.items()}
        for k, v in value.items():
            if k not in by_json:
                near = difflib.get_close_matches(k, list(by_json), n=1)
                self.err(where, f"{path}.{k}", f"unknown field of {typ}"
                         + (f" (did you mean {near[0]}?)" if near else ""))
                continue
            self.walk(where, f"{path}.{k}", v, cls.openapi_types[by_json[k]])

    def required(self, where, obj, cls):
        """The models' constructors refuse a missing required field (client-side validation)."""
        class Response:  # what ApiClient.deserialize reads
            def __init__(self, data):
                import json
                self.data = json.dumps(data)
        try:
            ApiClient().deserialize(Response(obj), cls.__name__)
        except ValueError as e:
            self.err(where, "", f"a required field is missing: {e}")

    def daemonset_rules(self, where, ds):
        spec = ds.get("spec") or {}
        sel = ((spec.get("selector") or {}).get("matchLabels")) or {}
        tmpl = spec.get("template") or {}
        labels = ((tmpl.get("metadata") or {}).get("labels")) or {}
        for k, v in sel.items():
            if labels.get(k) != v:
                self.err(where, ".spec.selector", f"{k}={v} does not match the template's labels "
                         "(the API server rejects it: `selector` does not match template `labels`)")
        pod = tmpl.get("spec") or {}
        volumes = {v.get("name") for v in pod.get("volumes") or []}
        names = set()
        for i, c in enumerate(pod.get("containers") or []):
            n = c.get("name", "")
            if not DNS_LABEL.match(n):
                self.err(where, f".spec.template.spec.containers[{i}].name", f"{n!r} is not a DNS label")
            if n in names:
                self.err(where, f".spec.template.spec.containers[{i}].name", f"{n!r} twice")
            names.add(n)
            for j, vm in enumerate(c.get("volumeMounts") or []):
                if vm.get("name") not in volumes:
                    self.err(where, f".spec.template.spec.containers[{i}].volumeMounts[{j}]",
                             f"no volume named {vm.get('name')!r} in the pod")
                if not str(vm.get("mountPath", "")).startswith("/"):
                    self.err(where, f".spec.template.spec.containers[{i}].volumeMounts[{j}]",
                             "mountPath is not absolute")
        for i, v in enumerate(pod.get("volumes") or []):
            cm = v.get("configMap")
            if isinstance(cm, dict) and not cm.get("optional"):
                self.cm_refs.append((where, f".spec.template.spec.volumes[{i}].configMap", cm))
            hp = v.get("hostPath")
            if hp is not None and not str(hp.get("path", "")).startswith("/"):
                self.err(where, f".spec.template.spec.volumes[{i}].hostPath.path", "not absolute")
            if hp is not None and hp.get("type", "") not in (
                    "", "DirectoryOrCreate", "Directory", "FileOrCreate", "File", "Socket",
                    "CharDevice", "BlockDevice"):
                self.err(where, f".spec.template.spec.volumes[{i}].hostPath.type",
                         f"{hp.get('type')!r} is not a hostPath type")

    def check_object(self, where, obj, namespace):
        if not isinstance(obj, dict) or "apiVersion" not in obj or "kind" not in obj:
            self.err(where, "", "not a Kubernetes object (apiVersion and kind)")
            return
        if obj["apiVersion"] == "nvidia.com/v1" and obj["kind"] == "ClusterPolicy":
            self.cluster_policy(where, obj)
            return
        cls = model_class(obj["apiVersion"], obj["kind"])
        if cls is None:
            self.err(where, "", f"no schema for {obj['apiVersion']} {obj['kind']}")
            return
        before = len(self.errors)
        self.walk(where, "", obj, cls.__name__)
        if len(self.errors) == before:
            self.required(where, obj, cls)
        name = (obj.get("metadata") or {}).get("name", "")
        if not DNS_LABEL.match(name):
            self.err(where, ".metadata.name", f"{name!r} is not a DNS label")
        ns = (obj.get("metadata") or {}).get("namespace")
        if obj["kind"] != "Namespace" and namespace and ns not in (None, namespace):
            self.err(where, ".metadata.namespace", f"{ns!r}, the kustomization says {namespace!r}")
        if obj["kind"] == "DaemonSet":
            self.daemonset_rules(where, obj)
        if obj["kind"] == "ConfigMap":
            self.configmaps[name] = set(obj.get("data") or {}) | set(obj.get("binaryData") or {})

    def cluster_policy(self, where, obj):
        for key in set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
            self.err(where, f".{key}", "unknown field")
        meta = obj.get("metadata") or {}
        if not DNS_LABEL.match(meta.get("name", "")):
            self.err(where, ".metadata.name", f"{meta.get('name', '')!r} is not a DNS label")
        if "namespace" in meta:
            self.err(where, ".metadata.namespace", "a ClusterPolicy is cluster-scoped")
        spec = obj.get("spec")
        if not isinstance(spec, dict):
            self.err(where, ".spec", "must be an object")
            return
        for key in sorted(spec):
            if key not in CLUSTER_POLICY_SPEC:
                near = difflib.get_close_matches(key, CLUSTER_POLICY_SPEC, 1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                self.err(where, f".spec.{key}", f"unknown field{hint}")
            elif not isinstance(spec[key], dict):
                self.err(where, f".spec.{key}", "must be an object")
            elif "enabled" in spec[key] and not isinstance(spec[key]["enabled"], bool):
                self.err(where, f".spec.{key}.enabled", "must be a boolean")
        for path, want, why in CLUSTER_POLICY_RULES:
            v = (spec.get(path[0]) or {}).get(path[1]) if isinstance(spec.get(path[0]), dict) else None
            if v is not want:
                self.err(where, ".spec." + ".".join(path),
                         f"must be {str(want).lower()} beside hostprep ({why})")

    def configmap_rules(self):
        for where, path, cm in self.cm_refs:
            keys = self.configmaps.get(cm.get("name"))
            if keys is None:
                self.err(where, f"{path}.name",
                         f"no ConfigMap {cm.get('name')!r} in the kustomization")
                continue
            for j, item in enumerate(cm.get("items") or []):
                if item.get("key") not in keys:
                    self.err(where, f"{path}.items[{j}].key",
                             f"{item.get('key')!r} is not a key of ConfigMap {cm.get('name')!r}")


def main(argv):
    if len(argv) != 2:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    d = argv[1]
    kfile = os.path.join(d, "kustomization.yaml")
    c = Checker()
    with open(kfile) as f:
        k = yaml.safe_load(f)
    if k.get("apiVersion") != "kustomize.config.k8s.io/v1beta1" or k.get("kind") != "Kustomization":
        c.err(kfile, "", "not a kustomize.config.k8s.io/v1beta1 Kustomization")
    for key in set(k) - KUSTOMIZATION_KEYS:
        c.err(kfile, f".{key}", "unknown field")
    for i, img in enumerate(k.get("images") or []):
        if set(img) - {"name", "newName", "newTag", "digest"} or "name" not in img:
            c.err(kfile, f".images[{i}]", "an image entry has name and newName/newTag/digest")
    namespace = k.get("namespace")
    kinds = []
    for res in k.get("resources") or []:
        path = os.path.join(d, res)
        if not os.path.isfile(path):
            c.err(kfile, ".resources", f"{res}: no such file")
            continue
        with open(path) as f:
            for n, obj in enumerate(yaml.safe_load_all(f)):
                if obj is None:
                    continue
                c.check_object(f"{res}#{n}", obj, namespace)
                kinds.append(f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}")
    c.configmap_rules()
    listed = {os.path.basename(r) for r in k.get("resources") or []}
    for f in sorted(os.listdir(d)):
        if f.endswith(".yaml") and f != "kustomization.yaml" and f not in listed:
            c.err(kfile, ".resources", f"{f} is in {d} but not a resource")
    for e in c.errors:
        print(e)
    if c.errors:
        print(f"{len(c.errors)} problem(s)")
        return 1
    print(f"valid: {', '.join(kinds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
