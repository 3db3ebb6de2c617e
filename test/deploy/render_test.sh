#!/usr/bin/env bash
# Renders deploy/ with `kubectl kustomize` and checks the key settings of the
# gpusched manifests, then checks that every file in deploy/examples parses.
# Usage: render_test.sh PATH/TO/deploy
set -euo pipefail

fail() {
  echo "render test: FAIL: $*" >&2
  exit 1
}

[[ $# -eq 1 ]] || fail "usage: $0 PATH/TO/deploy"
deploy_dir=$1
[[ -f "${deploy_dir}/kustomization.yaml" ]] || fail "no kustomization.yaml in ${deploy_dir}"
command -v kubectl >/dev/null || fail "kubectl not found"

work=$(mktemp -d)
trap 'rm -rf "${work}"' EXIT

rendered=${work}/rendered.yaml
kubectl kustomize "${deploy_dir}" >"${rendered}" || fail "kubectl kustomize ${deploy_dir} failed"

# Prints the YAML document (between --- separators) of the given kind and
# metadata.name; empty output if there is none.
doc() {
  awk -v kind="$1" -v name="$2" '
    function flush() {
      if (k == kind && n == name) printf "%s", buf
      buf = ""; k = ""; n = ""; in_meta = 0
    }
    /^---/ { flush(); next }
    {
      buf = buf $0 "\n"
      if ($0 ~ /^kind: /) k = substr($0, 7)
      if ($0 ~ /^metadata:/) { in_meta = 1; next }
      if ($0 ~ /^[^ ]/) in_meta = 0
      if (in_meta && $0 ~ /^  name: /) n = substr($0, 9)
    }
    END { flush() }
  ' "${rendered}"
}

# expect_doc KIND NAME: the document must exist; it is saved for expect_in.
expect_doc() {
  current=$(doc "$1" "$2")
  [[ -n "${current}" ]] || fail "rendered output has no $1 named $2"
  current_label="$1/$2"
}

# expect_in REGEX: the last document from expect_doc must match REGEX.
expect_in() {
  grep -Eq -- "$1" <<<"${current}" || fail "${current_label} does not contain /$1/"
}

expect_doc Namespace gpusched-system

expect_doc Deployment gpusched
expect_in '^  replicas: 2$'
expect_in 'readOnlyRootFilesystem: true'
expect_in 'runAsNonRoot: true'
expect_in 'allowPrivilegeEscalation: false'
expect_in 'mountPath: /etc/gpusched$'
if grep -q 'subPath' <<<"${current}"; then
  fail "Deployment/gpusched mounts with subPath; ConfigMap updates would not propagate"
fi

expect_doc Service gpusched
expect_in 'port: 8888'

expect_doc ClusterRole gpusched
expect_in 'pods/binding'
expect_in 'pods/eviction'

expect_doc ConfigMap gpusched-policy
expect_in 'scheduler-policy.json'

expect_doc ConfigMap gpu-scheduler-config
expect_in 'nodeCacheCapable: true'
expect_in 'bindVerb: bind'
expect_in 'percentageOfNodesToScore: 100'
expect_in 'resourceName: gpu-scheduler'

expect_doc PriorityClass training-high
expect_doc PriorityClass training-low
expect_doc DaemonSet gpusched-topology-agent
expect_in 'nvidia.com/gpu.present: "true"'

expect_doc ConfigMap gpusched-grafana-dashboard
expect_in 'grafana_dashboard: "1"'

# Examples are applied by hand, so they are not in the kustomization. Try a
# client-side dry run; without a reachable API server (kubectl needs one for
# type discovery) fall back to structural checks plus an offline parse by
# rendering the files through a temporary kustomization.
examples_dir=${deploy_dir}/examples
shopt -s nullglob
examples=("${examples_dir}"/*.yaml "${examples_dir}"/*.yml)
[[ ${#examples[@]} -gt 0 ]] || fail "no example manifests in ${examples_dir}"
parse_dir=${work}/examples
mkdir -p "${parse_dir}"
printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n' \
  >"${parse_dir}/kustomization.yaml"
for f in "${examples[@]}"; do
  if kubectl create --dry-run=client --validate=false --request-timeout=5s -o name -f "$f" \
    >/dev/null 2>&1; then
    continue
  fi
  [[ -s "$f" ]] || fail "$f is empty"
  grep -Eq '^apiVersion: [^ ]+' "$f" || fail "$f has no apiVersion"
  grep -Eq '^kind: [A-Za-z]+' "$f" || fail "$f has no kind"
  base=$(basename "$f")
  cp "$f" "${parse_dir}/${base}"
  echo "  - ${base}" >>"${parse_dir}/kustomization.yaml"
done
if grep -q '^  - ' "${parse_dir}/kustomization.yaml"; then
  kubectl kustomize "${parse_dir}" >/dev/null || fail "example manifests do not parse"
fi

echo "render test: OK"
