#!/usr/bin/env bash
# Runs deploy/gen-certs.sh into a temporary folder and checks what it makes:
# a CA; a server certificate signed by it whose SANs are the Service's DNS
# names and that cannot serve as a client certificate; a client certificate
# signed by it; the two kubernetes.io/tls Secrets holding exactly those files;
# a second run renewing the leaves under the same CA. Then starts the real
# `gpusched serve` with the files, as deploy/extender.yaml does, and connects
# with curl over loopback: with the client certificate it is served, without
# one, with the server's certificate or with one from another CA it is
# refused. Needs openssl and curl; the Secrets are checked only where kubectl
# is installed (offline: gen-certs.sh --dry-run).
# Usage: gen_certs_test.sh PATH/TO/deploy PATH/TO/gpusched
set -euo pipefail

fail() {
  echo "gen-certs test: FAIL: $*" >&2
  exit 1
}

[[ $# -eq 2 ]] || fail "usage: $0 PATH/TO/deploy PATH/TO/gpusched"
deploy_dir=$1
gpusched=$2
script=${deploy_dir}/gen-certs.sh
[[ -x "${script}" ]] || fail "${script} is not executable"
[[ -x "${gpusched}" ]] || fail "${gpusched} is not executable"
for tool in openssl curl; do
  command -v "${tool}" >/dev/null || fail "${tool} not found"
done
have_kubectl=0
command -v kubectl >/dev/null && have_kubectl=1

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n "${server_pid}" ]]; then
    kill "${server_pid}" 2>/dev/null || true
    wait "${server_pid}" 2>/dev/null || true
  fi
  rm -rf "${work}"
}
trap cleanup EXIT

certs=${work}/certs
mode=--dry-run
[[ ${have_kubectl} -eq 1 ]] || mode=--no-apply
"${script}" --out "${certs}" "${mode}" >"${work}/secrets.yaml" 2>"${work}/gen.log" ||
  fail "gen-certs.sh failed: $(cat "${work}/gen.log")"

# --- The CA and what it signed.
text() { openssl x509 -in "$1" -noout -text; }
grep -q 'CA:TRUE' <<<"$(text "${certs}/ca.crt")" || fail "ca.crt is not a CA"
for leaf in server client; do
  openssl verify -CAfile "${certs}/ca.crt" "${certs}/${leaf}.crt" >/dev/null 2>&1 ||
    fail "${leaf}.crt does not verify against ca.crt"
  # The key belongs to the certificate.
  [[ "$(openssl pkey -in "${certs}/${leaf}.key" -pubout)" == \
  "$(openssl x509 -in "${certs}/${leaf}.crt" -noout -pubkey)" ]] ||
    fail "${leaf}.key is not the key of ${leaf}.crt"
done
sans=$(openssl x509 -in "${certs}/server.crt" -noout -ext subjectAltName)
for name in gpusched gpusched.gpusched-system gpusched.gpusched-system.svc \
  gpusched.gpusched-system.svc.cluster.local; do
  grep -Eq "DNS:${name//./\\.}(,|$)" <<<"${sans}" || fail "server.crt SANs lack ${name}: ${sans}"
done
openssl verify -purpose sslserver -CAfile "${certs}/ca.crt" "${certs}/server.crt" >/dev/null 2>&1 ||
  fail "server.crt is not valid for TLS servers"
openssl verify -purpose sslclient -CAfile "${certs}/ca.crt" "${certs}/client.crt" >/dev/null 2>&1 ||
  fail "client.crt is not valid for TLS clients"
if openssl verify -purpose sslclient -CAfile "${certs}/ca.crt" "${certs}/server.crt" \
  >/dev/null 2>&1; then
  fail "server.crt is also valid as a client certificate"
fi

# --- The Secrets: type kubernetes.io/tls with tls.crt, tls.key, ca.crt.
if [[ ${have_kubectl} -eq 1 ]]; then
  # secret_field NAME JSONPATH
  secret_field() {
    awk -v name="$1" '
      /^---$/ { if (hit) exit; buf = ""; next }
      { buf = buf $0 "\n" }
      $0 == "  name: " name { hit = 1 }
      END { if (hit) printf "%s", buf }
    ' "${work}/secrets.yaml" | kubectl label --local -f - t=1 -o "jsonpath=$2" ||
      fail "Secret $1 has no readable $2"
  }
  for entry in gpusched-server-tls:server gpu-scheduler-client-tls:client; do
    secret=${entry%%:*} file=${entry#*:}
    [[ "$(secret_field "${secret}" '{.type}')" == kubernetes.io/tls ]] ||
      fail "Secret ${secret} is not of type kubernetes.io/tls"
    [[ "$(secret_field "${secret}" '{.metadata.namespace}')" == gpusched-system ]] ||
      fail "Secret ${secret} is not in gpusched-system"
    for pair in tls.crt:${file}.crt tls.key:${file}.key ca.crt:ca.crt; do
      key=${pair%%:*} want=${certs}/${pair#*:}
      secret_field "${secret}" "{.data.${key//./\\.}}" | base64 -d >"${work}/got" ||
        fail "Secret ${secret} ${key} is not base64"
      cmp -s "${work}/got" "${want}" || fail "Secret ${secret} ${key} is not ${want}"
    done
  done
  # Nothing else: the CA's private key stays on the machine that ran the script.
  data_keys=$(awk '/^data:/ { d = 1; next } /^[^ ]/ { d = 0 } d' "${work}/secrets.yaml" | wc -l)
  [[ ${data_keys} -eq 6 ]] || fail "the two Secrets hold ${data_keys} keys, want 6"
else
  echo "gen-certs test: kubectl not found, Secrets not checked"
fi

# --- A second run renews the leaves under the same CA; --new-ca does not.
cp "${certs}/ca.crt" "${work}/ca.first" && cp "${certs}/server.crt" "${work}/server.first"
"${script}" --out "${certs}" --no-apply 2>/dev/null || fail "second run failed"
cmp -s "${certs}/ca.crt" "${work}/ca.first" || fail "a second run replaced the CA"
cmp -s "${certs}/server.crt" "${work}/server.first" && fail "a second run kept the server certificate"
openssl verify -CAfile "${certs}/ca.crt" "${certs}/server.crt" >/dev/null 2>&1 ||
  fail "the renewed server.crt does not verify"
other=${work}/other
"${script}" --out "${other}" --no-apply --new-ca 2>/dev/null || fail "run with --new-ca failed"
cmp -s "${other}/ca.crt" "${certs}/ca.crt" && fail "--new-ca reused the CA"
"${script}" --days 0 --no-apply --out "${work}/bad" 2>/dev/null && fail "--days 0 accepted"

# --- The real server with these files, as deploy/extender.yaml runs it:
# mTLS on the main port, and /healthz and /readyz on a plain-HTTP port.
source_dir=$(cd "${deploy_dir}/.." && pwd)
# start_server [ARGS...]: starts gpusched serve on loopback with the files
# plus ARGS; sets server_pid and port. Returns 1 if the server exits first.
start_server() {
  "${gpusched}" serve --config "${source_dir}/config/scheduler-policy.json" \
    --cluster "${source_dir}/config/demo-cluster.json" --listen 127.0.0.1:0 \
    --tls-cert "${certs}/server.crt" --tls-key "${certs}/server.key" \
    --tls-client-ca "${certs}/ca.crt" "$@" >"${work}/serve.out" 2>"${work}/serve.err" &
  server_pid=$!
  port=
  for _ in $(seq 1 100); do
    port=$(sed -nE 's|.* on https://127\.0\.0\.1:([0-9]+)/scheduler$|\1|p' "${work}/serve.out")
    [[ -n "${port}" ]] && return 0
    if ! kill -0 "${server_pid}" 2>/dev/null; then
      wait "${server_pid}" || true
      server_pid=
      return 1
    fi
    sleep 0.1
  done
  fail "gpusched serve did not report its port"
}
health_port=
if start_server --health-listen 127.0.0.1:0; then
  for _ in $(seq 1 100); do
    health_port=$(sed -nE 's|.*probes.* port ([0-9]+)$|\1|p' "${work}/serve.out")
    [[ -n "${health_port}" ]] && break
    sleep 0.1
  done
  [[ -n "${health_port}" ]] || fail "gpusched serve did not report its health port"
elif grep -q -- 'health-listen' "${work}/serve.err"; then
  # A binary from before --health-listen: check the TLS side alone.
  echo "gen-certs test: gpusched serve has no --health-listen, health port not checked"
  start_server || fail "gpusched serve exited: $(cat "${work}/serve.err")"
else
  fail "gpusched serve exited: $(cat "${work}/serve.err")"
fi

# fetch PATH [curl options]: the body of GET https://<service name>:port/PATH
# (the name resolves to loopback, so curl checks it against the SANs).
host=gpusched.gpusched-system.svc
fetch() {
  local path=$1
  shift
  curl -sS --fail --max-time 10 --resolve "${host}:${port}:127.0.0.1" \
    --cacert "${certs}/ca.crt" "$@" "https://${host}:${port}${path}"
}
client=(--cert "${certs}/client.crt" --key "${certs}/client.key")
fetch /healthz "${client[@]}" >/dev/null 2>"${work}/curl.err" ||
  fail "curl with the client certificate was refused: $(cat "${work}/curl.err")"
metrics=$(fetch /metrics "${client[@]}" 2>"${work}/curl.err") ||
  fail "GET /metrics with the client certificate failed: $(cat "${work}/curl.err")"
grep -q '^gpusched_' <<<"${metrics}" || fail "GET /metrics has no gpusched_ metrics"
if fetch /healthz >/dev/null 2>&1; then
  fail "served a client without a certificate"
fi
if fetch /metrics --cert "${certs}/server.crt" --key "${certs}/server.key" >/dev/null 2>&1; then
  fail "served a client presenting the server certificate"
fi
if fetch /metrics --cert "${other}/client.crt" --key "${other}/client.key" >/dev/null 2>&1; then
  fail "served a client certificate from another CA"
fi
# The name in urlPrefix is what the certificate covers; another is refused.
if curl -sS --fail --max-time 10 --resolve "wrong.example:${port}:127.0.0.1" \
  --cacert "${certs}/ca.crt" "${client[@]}" "https://wrong.example:${port}/healthz" \
  >/dev/null 2>&1; then
  fail "the server certificate passed for a name it does not carry"
fi

# The health port: plain HTTP, the probes and nothing else.
if [[ -n "${health_port}" ]]; then
  # status PATH: the HTTP status of GET http://127.0.0.1:<health port>PATH.
  status() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:${health_port}$1" || true
  }
  [[ "$(status /healthz)" == 200 ]] || fail "health port: GET /healthz is $(status /healthz)"
  [[ "$(status /readyz)" =~ ^(200|503)$ ]] || fail "health port: GET /readyz is $(status /readyz)"
  for path in /metrics /debug/queues /scheduler/filter; do
    code=$(status "${path}")
    [[ "${code}" =~ ^4 ]] || fail "health port serves ${path} (status ${code})"
  done
fi

echo "gen-certs test: OK"
