#!/usr/bin/env python3
"""Writes config/demo-cluster.json and config/examples/*.json (the embedded demo).

The demo is a Kubernetes List exactly as `kubectl get nodes,pods -A -o json` prints it:
DGX-1 V100, DGX A100, HGX H100 and 4xT4 PCIe nodes with some running pods.
Run from the repository root: python3 tools/make_demo_cluster.py
"""
import json

NODES = [
    # name, product, memory MiB, count, allocatable, topology annotation
    ("dgx1-v100-01", "Tesla-V100-SXM2-32GB", 32510, 8, 8, None),
    ("dgx1-v100-02", "Tesla-V100-SXM2-32GB", 32510, 8, 8, None),
    ("dgx-a100-01", "NVIDIA-A100-SXM4-80GB", 81920, 8, 8, None),
    ("dgx-a100-02", "NVIDIA-A100-SXM4-80GB", 81920, 8, 8, None),
    ("hgx-h100-01", "NVIDIA-H100-80GB-HBM3", 81559, 8, 8,
     [["X" if i == j else "NV18" for j in range(8)] for i in range(8)]),
    ("hgx-h100-02", "NVIDIA-H100-80GB-HBM3", 81559, 8, 8, None),
    ("t4-01", "Tesla-T4", 15360, 4, 4, None),
    ("t4-02", "Tesla-T4", 15360, 4, 4, None),
    ("t4-03", "Tesla-T4", 15360, 4, 3, None),  # one device unhealthy
    ("cpu-01", None, 0, 0, 0, None),
]

PODS = [
    # ns, name, node, gpus, ids, phase, priority class, priority, extra annotations
    ("team-a", "bert-large-0", "dgx1-v100-01", 4, "0,1,2,3", "Running", "training-low", 1000, {}),
    ("team-b", "finetune-7b-0", "dgx-a100-01", 2, "0,1", "Running", "training-high", 100000, {}),
    ("team-b", "resnet-legacy", "t4-01", 1, None, "Running", "training-low", 1000, {}),
    ("team-a", "eval-done", "hgx-h100-01", 8, "0,1,2,3,4,5,6,7", "Succeeded", "training-low", 1000, {}),
    ("team-c", "inference-small", "t4-02", 1, "0", "Running", "", 0, {"gpusched.io/gpu-milli": "500"}),
    ("team-a", "llm-sft-0", "hgx-h100-02", 4, "0,1,2,3", "Running", "training-high", 100000, {}),
    ("team-a", "hparam-sweep-0", "dgx1-v100-02", 8, "0,1,2,3,4,5,6,7", "Running", "training-low", 1000,
     {}),
]


def node(name, product, mem, count, alloc, topo):
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }
    annotations = {"node.alpha.kubernetes.io/ttl": "0"}
    status_gpu = {}
    if product:
        labels.update({
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.memory": str(mem),
            "nvidia.com/gpu.count": str(count),
        })
        status_gpu = {"nvidia.com/gpu": str(count)}
    if topo:
        annotations["gpusched.io/gpu-topology"] = json.dumps(topo, separators=(",", ":"))
    cap = {"cpu": "96", "memory": "1056507464Ki", "pods": "110", **status_gpu}
    alloc_map = dict(cap)
    alloc_map["cpu"] = "95"
    if product:
        alloc_map["nvidia.com/gpu"] = str(alloc)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-node-{name}", "labels": labels,
                     "annotations": annotations, "creationTimestamp": "2026-01-05T08:00:00Z"},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}
        if product else {},
        "status": {
            "capacity": cap,
            "allocatable": alloc_map,
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-11-01T10:00:00Z",
                            "lastTransitionTime": "2026-01-05T08:01:00Z", "reason": "KubeletReady",
                            "message": "kubelet is posting ready status"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def pod(ns, name, node_name, gpus, ids, phase, pc, prio, extra, created="2026-11-01T09:00:00Z"):
    ann = dict(extra)
    if ids is not None:
        ann["gpusched.io/gpu-ids"] = ids
    spec = {
        "containers": [{
            "name": "main",
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "resources": {"limits": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"},
                          "requests": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"}},
        }],
        "restartPolicy": "Never",
        "schedulerName": "gpu-scheduler",
        "priority": prio,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if pc:
        spec["priorityClassName"] = pc
    if node_name:
        spec["nodeName"] = node_name
    status = {"phase": phase}
    if node_name:
        status["startTime"] = "2026-11-01T09:00:05Z"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{ns}-{name}",
                     "creationTimestamp": created, "annotations": ann,
                     "labels": {"app": name}},
        "spec": spec,
        "status": status,
    }


# The pending pods of the sample requests in config/examples/: they are in the
# cluster file too, as kubectl shows them, because gpusched acts only on pods
# its cluster source shows (same UID).
PENDING = {
    # filter, prioritize, bind: fits on an A100 or H100 node as the demo starts
    "pretrain": ("team-a", "llm-pretrain-0-7xq2d", None, 4, None, "Pending", "training-high", 100000,
                 {"gpusched.io/gpu-model": "A100,H100", "gpusched.io/topology": "nvlink-required"},
                 "2026-11-02T10:15:02Z"),
    # filter with a NodeList
    "notebook": ("team-b", "notebook-1gpu", None, 1, None, "Pending", "training-low", 1000,
                 {"gpusched.io/gpu-memory": "16Gi"}, "2026-11-02T11:00:00Z"),
    # preempt: 8 V100s, both V100 nodes full of lower-priority pods
    "bert": ("team-a", "bert-xl-0", None, 8, None, "Pending", "training-high", 100000,
             {"gpusched.io/gpu-model": "V100"}, "2026-11-02T11:30:00Z"),
}


def main():
    pending_pods = {k: pod(*v[:9], created=v[9]) for k, v in PENDING.items()}
    items = [node(*n) for n in NODES] + [pod(*p) for p in PODS] + list(pending_pods.values())
    with open("config/demo-cluster.json", "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                   "items": items}, f, indent=2)
        f.write("\n")
    names = [n[0] for n in NODES]
    pending, small, bert = ({k: v for k, v in pending_pods[key].items() if k not in ("apiVersion", "kind")}
                            for key in ("pretrain", "notebook", "bert"))
    ex = "config/examples/"
    with open(ex + "filter-request.json", "w") as f:
        json.dump({"Pod": pending, "Nodes": None, "NodeNames": names}, f, indent=2)
        f.write("\n")
    with open(ex + "prioritize-request.json", "w") as f:
        json.dump({"Pod": pending, "Nodes": None,
                   "NodeNames": ["dgx-a100-01", "dgx-a100-02", "hgx-h100-01", "hgx-h100-02"]},
                  f, indent=2)
        f.write("\n")
    full_nodes = [node(*n) for n in NODES if n[0] in ("t4-01", "dgx1-v100-02", "cpu-01")]
    for n in full_nodes:
        del n["apiVersion"], n["kind"]
    with open(ex + "filter-request-nodelist.json", "w") as f:
        json.dump({"Pod": small, "Nodes": {"metadata": {}, "items": full_nodes}, "NodeNames": None},
                  f, indent=2)
        f.write("\n")
    with open(ex + "bind-request.json", "w") as f:
        json.dump({"PodName": "llm-pretrain-0-7xq2d", "PodNamespace": "team-a",
                   "PodUID": "uid-team-a-llm-pretrain-0-7xq2d", "Node": "dgx-a100-02"}, f, indent=2)
        f.write("\n")
    with open(ex + "preempt-request.json", "w") as f:
        json.dump({"Pod": bert, "NodeNameToVictims": None,
                   "NodeNameToMetaVictims": {
                       "dgx1-v100-01": {"Pods": [{"UID": "uid-team-a-bert-large-0"}], "NumPDBViolations": 0},
                       "dgx1-v100-02": {"Pods": [{"UID": "uid-team-a-hparam-sweep-0"}],
                                        "NumPDBViolations": 0}}},
                  f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
