#!/usr/bin/env python3
"""Translate the pod spec of a Kubernetes DaemonSet manifest into an OCI runtime bundle config.

    pod2oci.py --manifest systemd/kubernetes/hostprep-container.yaml
               --kustomization systemd/kubernetes/kustomization.yaml
               --image-layout DIR --rootfs /var/lib/hostprep-oci/rootfs --out BUNDLE_DIR

What a kubelet and a CRI runtime (containerd's CRI plugin) would make of the pod for the node,
written as BUNDLE_DIR/config.json (OCI runtime spec 1.0, config.md / config-linux.md) plus
BUNDLE_DIR/pod.json and pod.env (the same as shell variables), what the runtime spec has no
place for, for the node-side runner: the hostPath directories to create before the start, the
termination grace period, the names.
Nothing is copied by hand: a change to the manifest is a change to the bundle.

Translated:
- the image: the container's `image` after the kustomization's `images:` entries (name, newName,
  newTag, digest), which must name the image in --image-layout (its index.json
  io.containerd.image.name annotation), else exit 1: the DaemonSet would run another image;
- process: `command` + `args` with Kubernetes' rules against the image config's Entrypoint/Cmd
  (command replaces Entrypoint, args replace Cmd), `workingDir`, the image's Env then the
  container's `env` (`value` only: valueFrom reads the API server, which a node without kubelet
  does not have; --env-override NAME=VALUE stands in for such a variable and is named in pod.json);
- securityContext: privileged (every capability, no seccomp/AppArmor, no masked or read-only
  /proc paths, /sys and cgroupfs read-write, every device allowed in the device cgroup; the
  container's own /dev is the runtime's tmpfs: the pods here use the host's /dev through a
  hostPath volume), capabilities add/drop, readOnlyRootFilesystem, allowPrivilegeEscalation
  (noNewPrivileges), runAsUser/runAsGroup;
- hostNetwork (no network namespace, and the host's UTS namespace, as the CRI does), hostPID (no
  PID namespace), hostIPC (no IPC namespace);
- volumes: hostPath (rbind, rprivate; readOnly: ro; mountPropagation HostToContainer: rslave,
  Bidirectional: rshared); type DirectoryOrCreate / FileOrCreate are listed in pod.json for the
  runner to create, Directory / File must exist at the start; configMap, from a ConfigMap in the
  manifest's own documents: its data keys (or its items, key -> path) written as files with
  defaultMode (or the item's mode) into BUNDLE_DIR/configmaps/VOLUME, bind-mounted read-only (the
  kubelet always mounts configMap volumes read-only) from that path relative to the bundle (OCI
  runtime spec config.md: bind sources are absolute or relative to the bundle); a ConfigMap that
  is not there, a missing key, binaryData or a volume that is optional are not translated;
- resources: limits.memory (memory limit), requests.cpu (CPU shares, milli-CPUs * 1024 / 1000),
  limits.cpu (CFS quota over a 100 ms period);
- terminationGracePeriodSeconds: pod.json and the annotation io.kubernetes.pod.terminationGracePeriod.
Not translated (exit 2 if present, so nothing is silently dropped): other volume types, probes,
lifecycle hooks, init containers, more than one container, fields of securityContext not above.
Left out as in no pod of ours: /etc/hosts, /etc/resolv.conf, /dev/termination-log, the service
environment variables.
"""
import argparse
import json
import os
import re
import shlex
import sys

import yaml

CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
    "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
]
# containerd's default capability set for a container that is not privileged
# (containerd pkg/oci/spec.go, defaultUnixCaps).
DEFAULT_CAPS = [
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
    "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
]
# The paths a runtime hides or makes read-only in a container that is not privileged (containerd
# pkg/oci/spec.go, populateDefaultUnixSpec).
MASKED = ["/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
          "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/sys/firmware",
          "/proc/scsi"]
READONLY = ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]

SECURITY_KEYS = {"privileged", "capabilities", "readOnlyRootFilesystem",
                 "allowPrivilegeEscalation", "runAsUser", "runAsGroup", "runAsNonRoot"}
CONTAINER_KEYS = {"name", "image", "imagePullPolicy", "command", "args", "workingDir", "env",
                  "securityContext", "resources", "volumeMounts"}
POD_KEYS = {"nodeSelector", "hostNetwork", "hostPID", "hostIPC", "priorityClassName",
            "terminationGracePeriodSeconds", "tolerations", "containers", "volumes",
            "serviceAccountName", "affinity"}


class Unsupported(Exception):
    pass


def quantity_bytes(q):
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|Ti|k|M|G|T)?", str(q))
    if not m:
        raise Unsupported(f"memory quantity {q!r}")
    mult = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
            "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}[m.group(2)]
    return int(m.group(1)) * mult


def milli_cpu(q):
    s = str(q)
    if s.endswith("m"):
        return int(s[:-1])
    return int(float(s) * 1000)


def kustomize_image(image, kustomization):
    """The image after kustomize's images: transformer (name matches the part before the tag)."""
    if not kustomization:
        return image
    name, tag = image, None
    if "@" in name:
        name = name.split("@", 1)[0]
    elif re.search(r":[^/]+$", name):
        name, tag = name.rsplit(":", 1)
    for e in kustomization.get("images") or []:
        if e.get("name") != name:
            continue
        new_name = e.get("newName", name)
        if "digest" in e:
            return f"{new_name}@{e['digest']}"
        new_tag = e.get("newTag", tag)
        return f"{new_name}:{new_tag}" if new_tag else new_name
    return image


def project_configmap(src, configmaps, out):
    """A configMap volume's files, as the kubelet writes them (pkg/volume/configmap)."""
    if set(src) - {"name", "items", "defaultMode"}:
        raise Unsupported(f"configMap volume fields {sorted(set(src) - {'name', 'items', 'defaultMode'})}")
    cm = configmaps.get(src["name"])
    if cm is None:
        raise Unsupported(f"configMap {src['name']}: not a document of the manifest")
    if cm.get("binaryData"):
        raise Unsupported(f"configMap {src['name']}: binaryData")
    data = cm.get("data") or {}
    items = src.get("items") or [{"key": k, "path": k} for k in sorted(data)]
    os.makedirs(out, exist_ok=True)
    for item in items:
        if item["key"] not in data:
            raise Unsupported(f"configMap {src['name']}: no key {item['key']!r}")
        path = os.path.normpath(item["path"])
        if path.startswith("..") or os.path.isabs(path):
            raise Unsupported(f"configMap {src['name']}: item path {item['path']!r}")
        dest = os.path.join(out, path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(data[item["key"]])
        os.chmod(dest, item.get("mode", src.get("defaultMode", 0o644)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--kustomization")
    ap.add_argument("--image-layout", required=True, help="an unpacked OCI image layout")
    ap.add_argument("--rootfs", required=True, help="root.path in config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--container", help="the container's name (default: the only one)")
    ap.add_argument("--env-override", action="append", default=[], metavar="NAME=VALUE")
    a = ap.parse_args()

    with open(a.manifest) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    ds = [d for d in docs if d.get("kind") == "DaemonSet"]
    if len(ds) != 1:
        raise Unsupported(f"{a.manifest}: {len(ds)} DaemonSets, want one")
    ds = ds[0]
    pod = ds["spec"]["template"]["spec"]
    extra = set(pod) - POD_KEYS
    if extra:
        raise Unsupported(f"pod spec fields {sorted(extra)}")
    containers = pod["containers"]
    if a.container:
        containers = [c for c in containers if c["name"] == a.container]
    if len(containers) != 1:
        raise Unsupported(f"{len(containers)} containers, want one (--container NAME)")
    c = containers[0]
    extra = set(c) - CONTAINER_KEYS
    if extra:
        raise Unsupported(f"container fields {sorted(extra)}")
    kust = None
    if a.kustomization:
        with open(a.kustomization) as f:
            kust = yaml.safe_load(f)

    # The image: the one the kustomization makes of the manifest's, and the one in the layout.
    with open(os.path.join(a.image_layout, "index.json")) as f:
        index = json.load(f)
    man_desc = index["manifests"][0]
    built = man_desc.get("annotations", {}).get("io.containerd.image.name")
    image = kustomize_image(c["image"], kust)
    if image != built:
        print(f"pod2oci: {a.manifest}: the container runs image {image!r} (after the "
              f"kustomization), the layout holds {built!r}", file=sys.stderr)
        return 1

    def blob(desc):
        alg, hexd = desc["digest"].split(":", 1)
        with open(os.path.join(a.image_layout, "blobs", alg, hexd)) as f:
            return json.load(f)
    cfg = blob(blob(man_desc)["config"]).get("config", {})

    # process.args: Kubernetes' command/args against the image's Entrypoint/Cmd.
    entry, cmd = cfg.get("Entrypoint") or [], cfg.get("Cmd") or []
    if "command" in c:
        args = list(c["command"]) + list(c.get("args", []))
    elif "args" in c:
        args = entry + list(c["args"])
    else:
        args = entry + cmd
    env = list(cfg.get("Env") or [])
    overrides = dict(o.split("=", 1) for o in a.env_override)
    substituted = {}
    for e in c.get("env", []):
        if "value" in e:
            env.append(f"{e['name']}={e['value']}")
        elif e["name"] in overrides:
            env.append(f"{e['name']}={overrides[e['name']]}")
            substituted[e["name"]] = {"valueFrom": e.get("valueFrom"), "value": overrides[e["name"]]}
        else:
            raise Unsupported(f"env {e['name']}: valueFrom needs the API server "
                              f"(--env-override {e['name']}=VALUE)")

    sc = c.get("securityContext", {}) or {}
    extra = set(sc) - SECURITY_KEYS
    if extra:
        raise Unsupported(f"securityContext fields {sorted(extra)}")
    privileged = bool(sc.get("privileged"))
    if privileged:
        caps = list(CAPS)
    else:
        caps = list(DEFAULT_CAPS)
        add = ["CAP_" + x.upper() for x in (sc.get("capabilities") or {}).get("add", [])]
        drop = ["CAP_" + x.upper() for x in (sc.get("capabilities") or {}).get("drop", [])]
        caps = [x for x in caps + add if x not in drop and "CAP_ALL" not in drop]
        caps = sorted(set(caps))

    process = {
        "terminal": False,
        "user": {"uid": int(sc.get("runAsUser", 0)), "gid": int(sc.get("runAsGroup", 0))},
        "args": args,
        "env": env,
        "cwd": c.get("workingDir") or cfg.get("WorkingDir") or "/",
        "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
        "noNewPrivileges": sc.get("allowPrivilegeEscalation") is False,
    }

    host_network = bool(pod.get("hostNetwork"))
    namespaces = [{"type": "mount"}]
    if not pod.get("hostPID"):
        namespaces.append({"type": "pid"})
    if not host_network:
        namespaces += [{"type": "network"}, {"type": "uts"}]
    if not pod.get("hostIPC"):
        namespaces.append({"type": "ipc"})

    ro = [] if privileged else ["ro"]
    mounts = [
        {"destination": "/proc", "type": "proc", "source": "proc",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev"] + ro},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
         "options": ["nosuid", "noexec", "nodev", "relatime"] + ro},
    ]
    # Volumes, mounted where the container's volumeMounts say, in their order.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    configmaps = {d["metadata"]["name"]: d for d in docs if d.get("kind") == "ConfigMap"}
    create = []
    for vm in c.get("volumeMounts", []):
        v = volumes.get(vm["name"])
        if v is None:
            raise Unsupported(f"volumeMount {vm['name']}: no such volume")
        if "subPath" in vm:
            raise Unsupported("volumeMount subPath")
        if set(v) == {"name", "configMap"}:
            rel = os.path.join("configmaps", v["name"])
            project_configmap(v["configMap"], configmaps, os.path.join(a.out, rel))
            mounts.append({"destination": vm["mountPath"], "type": "bind", "source": rel,
                           "options": ["rbind", "rprivate", "ro"]})
            continue
        if set(v) != {"name", "hostPath"}:
            raise Unsupported(f"volume {v['name']}: only hostPath and configMap volumes")
        hp = v["hostPath"]
        kind = hp.get("type", "")
        if kind in ("DirectoryOrCreate", "FileOrCreate"):
            create.append({"path": hp["path"], "type": kind})
        elif kind not in ("", "Directory", "File"):
            raise Unsupported(f"hostPath type {kind}")
        opts = ["rbind", "rprivate"]
        prop = vm.get("mountPropagation", "None")
        if prop == "HostToContainer":
            opts = ["rbind", "rslave"]
        elif prop == "Bidirectional":
            opts = ["rbind", "rshared"]
        if vm.get("readOnly"):
            opts.append("ro")
        mounts.append({"destination": vm["mountPath"], "type": "bind", "source": hp["path"],
                       "options": opts})

    resources = {"devices": [{"allow": privileged, "access": "rwm"}]}
    res = c.get("resources") or {}
    limits, requests = res.get("limits") or {}, res.get("requests") or {}
    if "memory" in limits:
        resources["memory"] = {"limit": quantity_bytes(limits["memory"])}
    cpu = {}
    if "cpu" in requests:
        cpu["shares"] = max(2, milli_cpu(requests["cpu"]) * 1024 // 1000)
    if "cpu" in limits:
        cpu["period"], cpu["quota"] = 100000, milli_cpu(limits["cpu"]) * 100
    if cpu:
        resources["cpu"] = cpu

    grace = int(pod.get("terminationGracePeriodSeconds", 30))
    name = f"{ds['metadata']['name']}-{c['name']}"
    linux = {
        "namespaces": namespaces,
        "resources": resources,
        "cgroupsPath": f"/hostprep-pods/{name}",
    }
    if not privileged:
        linux["maskedPaths"] = MASKED
        linux["readonlyPaths"] = READONLY
    config = {
        "ociVersion": "1.0.2",
        "process": process,
        "root": {"path": a.rootfs, "readonly": bool(sc.get("readOnlyRootFilesystem"))},
        "hostname": None if host_network else ds["metadata"]["name"],
        "mounts": mounts,
        "linux": linux,
        "annotations": {
            "io.kubernetes.pod.name": ds["metadata"]["name"],
            "io.kubernetes.pod.namespace": ds["metadata"].get("namespace", "default"),
            "io.kubernetes.container.name": c["name"],
            "io.kubernetes.pod.terminationGracePeriod": str(grace),
            "org.opencontainers.image.ref.name": image,
        },
    }
    if config["hostname"] is None:
        del config["hostname"]
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1, sort_keys=True)
    with open(os.path.join(a.out, "pod.json"), "w") as f:
        json.dump({"name": name, "image": image, "terminationGracePeriodSeconds": grace,
                   "create": create, "envSubstituted": substituted,
                   "manifest": os.path.basename(a.manifest)}, f, indent=1, sort_keys=True)
    # The same for a shell without jq (the guest's runner sources it).
    with open(os.path.join(a.out, "pod.env"), "w") as f:
        q = shlex.quote
        f.write(f"NAME={q(name)}\nGRACE={grace}\n")
        f.write("CREATE_DIRS=" + q(" ".join(x["path"] for x in create
                                            if x["type"] == "DirectoryOrCreate")) + "\n")
        f.write("CREATE_FILES=" + q(" ".join(x["path"] for x in create
                                             if x["type"] == "FileOrCreate")) + "\n")
        f.write("HOST_PATHS=" + q(" ".join(m["source"] for m in mounts
                                           if m["type"] == "bind" and m["source"].startswith("/")))
                + "\n")
    print(f"pod2oci: {a.manifest} -> {a.out}/config.json ({image}, "
          f"{'privileged' if privileged else 'unprivileged'}, {len(mounts)} mounts)")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Unsupported as e:
        print(f"pod2oci: not translated: {e}", file=sys.stderr)
        sys.exit(2)
