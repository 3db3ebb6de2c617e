#!/usr/bin/env bash
# Renders deploy/ with `kubectl kustomize` and checks the key settings of the
# gpusched manifests: mutual TLS between kube-scheduler and the extender by
# default (cert-manager Certificates, the extender's TLS flags, the extender
# stanza's tlsConfig), probes on the plain-HTTP health port, the
# NetworkPolicy, and that deploy/without-cert-manager renders the same
# objects minus cert-manager's. Then checks that every file in deploy/examples
# parses.
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
# Only the leader is Ready, so a rollout (an upgrade, or the restart after a
# certificate renewal) must be allowed to take the Ready pod down.
expect_in 'maxUnavailable: 100%'
if grep -q 'subPath' <<<"${current}"; then
  fail "Deployment/gpusched mounts with subPath; ConfigMap updates would not propagate"
fi

expect_doc Service gpusched
expect_in 'port: 8888'

# get KIND NAME JSONPATH: a field of a rendered object, read offline by
# kubectl (label --local changes nothing and needs no API server).
get() {
  doc "$1" "$2" | kubectl label --local -f - gpusched-render-test=1 -o "jsonpath=$3" ||
    fail "cannot read $3 of $1/$2"
}

# expect_eq WHAT ACTUAL EXPECTED
expect_eq() {
  [[ "$2" == "$3" ]] || fail "$1 is '$2', want '$3'"
}

# --- Mutual TLS, extender side.
container='.spec.template.spec.containers[?(@.name=="gpusched")]'
args=$(get Deployment gpusched "{range ${container}.args[*]}{@}{\"\\n\"}{end}")
# arg FLAG: the value after FLAG in the extender's args (empty if absent).
arg() {
  awk -v flag="$1" 'prev == flag { print; exit } { prev = $0 }' <<<"${args}"
}
expect_eq "extender --tls-cert" "$(arg --tls-cert)" /etc/gpusched-tls/tls.crt
expect_eq "extender --tls-key" "$(arg --tls-key)" /etc/gpusched-tls/tls.key
expect_eq "extender --tls-client-ca (mutual TLS)" "$(arg --tls-client-ca)" /etc/gpusched-tls/ca.crt
# secret_at KIND NAME CONTAINER DIR: the Secret mounted at DIR in CONTAINER.
secret_at() {
  local vol
  vol=$(get "$1" "$2" "{.spec.template.spec.containers[?(@.name==\"$3\")].volumeMounts[?(@.mountPath==\"$4\")].name}")
  [[ -n "${vol}" ]] || fail "$1/$2 container $3 mounts nothing at $4"
  get "$1" "$2" "{.spec.template.spec.volumes[?(@.name==\"${vol}\")].secret.secretName}"
}
expect_eq "Secret at /etc/gpusched-tls in Deployment/gpusched" \
  "$(secret_at Deployment gpusched gpusched /etc/gpusched-tls)" gpusched-server-tls

# --- Probes on the plain-HTTP health port, which is not the main port.
main_listen=$(arg --listen)
health_listen=$(arg --health-listen)
[[ -n "${health_listen}" ]] || fail "Deployment/gpusched does not run --health-listen"
health_port=${health_listen##*:}
[[ "${health_port}" != "${main_listen##*:}" ]] ||
  fail "--health-listen ${health_listen} is the main port ${main_listen}"
for probe in readinessProbe:/readyz livenessProbe:/healthz; do
  kind=${probe%%:*}
  expect_eq "${kind} path" "$(get Deployment gpusched "{${container}.${kind}.httpGet.path}")" \
    "${probe#*:}"
  port=$(get Deployment gpusched "{${container}.${kind}.httpGet.port}")
  if [[ ! "${port}" =~ ^[0-9]+$ ]]; then
    port=$(get Deployment gpusched "{${container}.ports[?(@.name==\"${port}\")].containerPort}")
  fi
  expect_eq "${kind} port" "${port}" "${health_port}"
  scheme=$(get Deployment gpusched "{${container}.${kind}.httpGet.scheme}")
  [[ -z "${scheme}" || "${scheme}" == HTTP ]] || fail "${kind} scheme is ${scheme}, want HTTP"
done

# --- Mutual TLS, kube-scheduler side: the extender stanza.
get ConfigMap gpu-scheduler-config '{.data.config\.yaml}' >"${work}/scheduler-config.yaml"
stanza() {
  kubectl label --local -f "${work}/scheduler-config.yaml" gpusched-render-test=1 \
    -o "jsonpath={.extenders[0].$1}" || fail "cannot read extenders[0].$1"
}
url=$(stanza urlPrefix)
[[ "${url}" =~ ^https://([^:/]+):([0-9]+)/ ]] || fail "extender urlPrefix ${url} is not https://HOST:PORT/..."
url_host=${BASH_REMATCH[1]}
expect_eq "urlPrefix port" "${BASH_REMATCH[2]}" "$(get Service gpusched '{.spec.ports[0].port}')"
expect_eq "extender enableHTTPS" "$(stanza enableHTTPS)" true
[[ "$(stanza tlsConfig.insecure)" != true ]] || fail "extender tlsConfig.insecure is true"
expect_eq "Secret at /etc/gpusched-tls in Deployment/gpu-scheduler" \
  "$(secret_at Deployment gpu-scheduler kube-scheduler /etc/gpusched-tls)" gpu-scheduler-client-tls
expect_eq "tlsConfig.caFile" "$(stanza tlsConfig.caFile)" /etc/gpusched-tls/ca.crt
expect_eq "tlsConfig.certFile" "$(stanza tlsConfig.certFile)" /etc/gpusched-tls/tls.crt
expect_eq "tlsConfig.keyFile" "$(stanza tlsConfig.keyFile)" /etc/gpusched-tls/tls.key

# --- cert-manager: self-signed Issuer -> CA Certificate -> CA Issuer -> the
# server and client Certificates, written to the Secrets mounted above.
[[ -n "$(get Issuer gpusched-selfsigned '{.spec.selfSigned}')" ]] ||
  fail "Issuer/gpusched-selfsigned is not selfSigned"
expect_eq "Certificate/gpusched-ca isCA" "$(get Certificate gpusched-ca '{.spec.isCA}')" true
expect_eq "Certificate/gpusched-ca issuer" \
  "$(get Certificate gpusched-ca '{.spec.issuerRef.name}')" gpusched-selfsigned
expect_eq "Issuer/gpusched-ca CA Secret" "$(get Issuer gpusched-ca '{.spec.ca.secretName}')" \
  "$(get Certificate gpusched-ca '{.spec.secretName}')"
# leaf NAME SECRET USAGE
leaf() {
  expect_eq "Certificate/$1 secretName" "$(get Certificate "$1" '{.spec.secretName}')" "$2"
  expect_eq "Certificate/$1 issuer" "$(get Certificate "$1" '{.spec.issuerRef.name}')" gpusched-ca
  local usages
  usages=$(get Certificate "$1" '{range .spec.usages[*]}{@}{"\n"}{end}')
  grep -qxF "$3" <<<"${usages}" || fail "Certificate/$1 usages lack '$3'"
}
leaf gpusched-server gpusched-server-tls "server auth"
leaf gpu-scheduler-client gpu-scheduler-client-tls "client auth"
dns_names=$(get Certificate gpusched-server '{range .spec.dnsNames[*]}{@}{"\n"}{end}')
grep -qxF "${url_host}" <<<"${dns_names}" ||
  fail "Certificate/gpusched-server dnsNames lack ${url_host} (the host in urlPrefix)"

# --- NetworkPolicy: the main port only from gpu-scheduler and Prometheus,
# the health port from anywhere.
expect_eq "NetworkPolicy/gpusched podSelector" \
  "$(get NetworkPolicy gpusched '{.spec.podSelector.matchLabels}')" \
  "$(get Deployment gpusched '{.spec.selector.matchLabels}')"
main_port=${main_listen##*:}
rules=$(get NetworkPolicy gpusched '{range .spec.ingress[*]}{.ports[*].port}|{.from}{"\n"}{end}')
expect_rule() {
  grep -qxF -- "$1" <<<"${rules}" || fail "NetworkPolicy/gpusched has no ingress rule '$1' in:
${rules}"
}
scheduler_label=$(get Deployment gpu-scheduler \
  '{.spec.template.metadata.labels.app\.kubernetes\.io/name}')
expect_rule "${main_port}|[{\"podSelector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"${scheduler_label}\"}}}]"
expect_rule "${main_port}|[{\"namespaceSelector\":{},\"podSelector\":{\"matchLabels\":{\"app.kubernetes.io/name\":\"prometheus\"}}}]"
expect_rule "${health_port}|"
[[ $(wc -l <<<"${rules}") -eq 3 ]] || fail "NetworkPolicy/gpusched has other ingress rules:
${rules}"

# --- Without cert-manager: the same objects minus cert-manager's.
alt=${work}/without-cert-manager.yaml
kubectl kustomize --load-restrictor LoadRestrictionsNone "${deploy_dir}/without-cert-manager" \
  >"${alt}" || fail "kubectl kustomize ${deploy_dir}/without-cert-manager failed"
# Drops the documents whose apiVersion is cert-manager's.
awk '
  function flush() { if (buf != "" && !cm) printf "%s", buf; buf = ""; cm = 0 }
  /^---$/ { flush(); buf = $0 "\n"; next }
  { buf = buf $0 "\n"; if ($0 ~ /^apiVersion: cert-manager\.io\//) cm = 1 }
  END { flush() }
' "${rendered}" | sed '1{/^---$/d}' >"${work}/without-cm-expected.yaml"
diff -u "${work}/without-cm-expected.yaml" "${alt}" >&2 ||
  fail "deploy/without-cert-manager differs from deploy/ in more than the cert-manager objects"

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
# The node agent: GPU nodes only, GPU taints tolerated, the kubelet's device
# plugin and pod-resources directories mounted; rights limited to its node's
# pods' two device annotations (RBAC plus the admission policy).
expect_doc DaemonSet gpusched-node-agent
expect_in 'nvidia.com/gpu.present: "true"'
expect_in 'key: nvidia.com/gpu'
expect_in '- node-agent'
expect_in 'path: /var/lib/kubelet/device-plugins'
expect_in 'path: /var/lib/kubelet/pod-resources'
expect_in 'serviceAccountName: gpusched-node-agent'
expect_doc ClusterRole gpusched-node-agent
# The verbs of the rule whose resources are exactly [pods].
pod_verbs=$(awk '
  /^- apiGroups:/ { if (res == "pods,") print verbs; res = ""; verbs = ""; sect = "" }
  /^  resources:/ { sect = "r"; next }
  /^  verbs:/ { sect = "v"; next }
  /^  - / { if (sect == "r") res = res substr($0, 5) ","; if (sect == "v") verbs = verbs substr($0, 5) " " }
  END { if (res == "pods,") print verbs }
' <<<"${current}")
[[ "${pod_verbs}" == "get list patch " ]] ||
  fail "ClusterRole/gpusched-node-agent: pods verbs are '${pod_verbs}', want get list patch"
if grep -Eq -- '- (delete|update|deletecollection|"\*")$' <<<"${current}"; then
  fail "ClusterRole/gpusched-node-agent grants a delete or update verb"
fi
if grep -Eq 'secrets|configmaps|pods/binding|pods/eviction' <<<"${current}"; then
  fail "ClusterRole/gpusched-node-agent grants more than nodes, pods and events"
fi
expect_doc ValidatingAdmissionPolicy gpusched-node-agent-pods
expect_in 'authentication.kubernetes.io/node-name'
expect_in 'gpusched.io/gpu-ids-confirmed'
expect_doc ValidatingAdmissionPolicyBinding gpusched-node-agent-pods
expect_in 'policyName: gpusched-node-agent-pods'
if [[ -n "$(doc DaemonSet gpusched-topology-agent)" ]]; then
  fail "the topology-agent DaemonSet is still rendered beside the node agent"
fi

expect_doc ConfigMap gpusched-grafana-dashboard
expect_in 'grafana_dashboard: "1"'

# Quotas as objects: the CRD with its validation and status subresource,
# the extender's rights on it, and read access aggregated into view.
expect_doc CustomResourceDefinition gpuquotas.gpusched.io
expect_in 'kind: GPUQuota'
expect_in 'x-kubernetes-validations'
expect_in 'self.limit >= '
expect_in 'status: \{\}'
expect_in 'jsonPath: .status.used'
expect_doc ClusterRole gpusched
expect_in 'gpuquotas/status'
expect_in 'elasticquotas'
expect_doc ClusterRole gpusched-gpuquota-view
expect_in 'rbac.authorization.k8s.io/aggregate-to-view: "true"'
if grep -Eq 'create|update|patch|delete' <<<"$(sed -n '/^rules:/,$p' <<<"${current}")"; then
  fail "ClusterRole/gpusched-gpuquota-view grants a write verb"
fi

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
