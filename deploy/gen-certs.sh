#!/usr/bin/env bash
# Creates the mutual-TLS certificates for gpusched without cert-manager: a CA,
# the extender's server certificate (SANs: every DNS name of the Service) and
# kube-scheduler's client certificate, both signed by the CA. Then stores
# them in the Secrets that deploy/ mounts, the same ones cert-manager writes
# from certificates.yaml (type kubernetes.io/tls, keys tls.crt, tls.key and
# ca.crt):
#   gpusched-server-tls       mounted by the extender
#   gpu-scheduler-client-tls  mounted by kube-scheduler
#   gpusched-metrics-client-tls  (only with --metrics-client) for Prometheus
#
# The CA's private key stays in --out on this machine, never in the cluster.
# Run again to renew the leaf certificates under the same CA (the CA in --out
# is reused); --new-ca replaces the CA too. Then restart both Deployments
# (docs/kubernetes.md, "Rotating certificates").
#
# Needs openssl, and kubectl unless --no-apply. Usage: gen-certs.sh --help
set -euo pipefail

usage() {
  cat <<'EOF'
Usage: deploy/gen-certs.sh [options]
  --out DIR          where the PEM files are written (default: ./gpusched-certs)
  --namespace NS     namespace of Service gpusched and of the Secrets
                     (default: gpusched-system)
  --service NAME     the extender's Service name (default: gpusched)
  --days N           validity of the server and client certificates (default: 90)
  --ca-days N        validity of a new CA (default: 3650)
  --new-ca           make a new CA even if DIR already holds one
  --metrics-client   also issue a client certificate for Prometheus
                     (Secret gpusched-metrics-client-tls)
  --no-apply         only write the files; create no Secrets
  --dry-run          print the Secrets as YAML instead of applying them
  -h, --help         this text
EOF
}

die() {
  echo "gen-certs.sh: $*" >&2
  exit 1
}

out=./gpusched-certs
namespace=gpusched-system
service=gpusched
days=90
ca_days=3650
new_ca=0
metrics_client=0
mode=apply

while [[ $# -gt 0 ]]; do
  case $1 in
    --out | --namespace | --service | --days | --ca-days)
      [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"
      case $1 in
        --out) out=$2 ;;
        --namespace) namespace=$2 ;;
        --service) service=$2 ;;
        --days) days=$2 ;;
        --ca-days) ca_days=$2 ;;
      esac
      shift 2
      ;;
    --new-ca) new_ca=1 && shift ;;
    --metrics-client) metrics_client=1 && shift ;;
    --no-apply) mode=files && shift ;;
    --dry-run) mode=print && shift ;;
    -h | --help) usage && exit 0 ;;
    *) usage >&2 && die "unknown argument: $1" ;;
  esac
done
[[ $days =~ ^[1-9][0-9]*$ ]] || die "--days must be a positive whole number, got '$days'"
[[ $ca_days =~ ^[1-9][0-9]*$ ]] || die "--ca-days must be a positive whole number, got '$ca_days'"
command -v openssl >/dev/null || die "openssl not found"
if [[ $mode != files ]]; then
  command -v kubectl >/dev/null || die "kubectl not found (or use --no-apply)"
fi

umask 077
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# new_key FILE: a P-256 private key (PKCS#8 PEM).
new_key() {
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null
}

# sign NAME CN EXTENSIONS: NAME.key and NAME.crt in $out, signed by the CA.
sign() {
  local name=$1 cn=$2 ext=$3
  new_key "$tmp/$name.key"
  openssl req -new -key "$tmp/$name.key" -subj "/CN=$cn" -out "$tmp/$name.csr"
  printf '%b\n' "$ext" >"$tmp/$name.ext"
  openssl x509 -req -in "$tmp/$name.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 \
    -extfile "$tmp/$name.ext" -out "$tmp/$name.crt" 2>/dev/null
  mv "$tmp/$name.key" "$out/$name.key"
  mv "$tmp/$name.crt" "$out/$name.crt"
}

if [[ $new_ca == 1 || ! -s $out/ca.crt || ! -s $out/ca.key ]]; then
  new_key "$tmp/ca.key"
  printf '%s\n' "[req]" "distinguished_name = dn" "x509_extensions = v3_ca" "[dn]" \
    "[v3_ca]" "basicConstraints = critical, CA:TRUE" \
    "keyUsage = critical, keyCertSign, cRLSign" \
    "subjectKeyIdentifier = hash" >"$tmp/ca.cnf"
  openssl req -x509 -new -key "$tmp/ca.key" -subj "/CN=gpusched-ca" -days "$ca_days" \
    -sha256 -config "$tmp/ca.cnf" -out "$tmp/ca.crt"
  mv "$tmp/ca.key" "$out/ca.key"
  mv "$tmp/ca.crt" "$out/ca.crt"
  echo "gen-certs.sh: new CA in $out/ca.crt" >&2
else
  echo "gen-certs.sh: reusing the CA in $out/ca.crt" >&2
fi

leaf="basicConstraints = critical, CA:FALSE\nkeyUsage = critical, digitalSignature"
leaf+="\nsubjectKeyIdentifier = hash\nauthorityKeyIdentifier = keyid"
svc=$service.$namespace
sign server "$svc.svc" "$leaf\nextendedKeyUsage = serverAuth\nsubjectAltName = \
DNS:$service, DNS:$svc, DNS:$svc.svc, DNS:$svc.svc.cluster.local"
sign client gpu-scheduler "$leaf\nextendedKeyUsage = clientAuth"
secrets=("gpusched-server-tls:server" "gpu-scheduler-client-tls:client")
if [[ $metrics_client == 1 ]]; then
  sign metrics-client prometheus "$leaf\nextendedKeyUsage = clientAuth"
  secrets+=("gpusched-metrics-client-tls:metrics-client")
fi
echo "gen-certs.sh: wrote the CA and the ${secrets[*]#*:} certificates to $out" >&2

[[ $mode == files ]] && exit 0
for entry in "${secrets[@]}"; do
  secret=${entry%%:*} file=${entry#*:}
  manifest=$(kubectl create secret generic "$secret" --namespace "$namespace" \
    --type kubernetes.io/tls --from-file "tls.crt=$out/$file.crt" \
    --from-file "tls.key=$out/$file.key" --from-file "ca.crt=$out/ca.crt" \
    --dry-run=client -o yaml)
  if [[ $mode == print ]]; then
    printf -- '---\n%s\n' "$manifest"
  else
    kubectl apply -f - <<<"$manifest"
  fi
done
