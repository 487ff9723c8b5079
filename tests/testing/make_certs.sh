#!/usr/bin/env bash
# Test certificates, made with the openssl command-line tool (never checked in, never reused
# between runs): the TLS tests of the API, etcd and PostgreSQL call this with a fresh directory.
#
# Usage: make_certs.sh DIR [CLIENT_CN ...]
#
# Writes into DIR (created if missing; keys are 0600, ECDSA P-256):
#   ca.pem ca.key                  the test CA every good certificate below is signed by
#   other-ca.pem other-ca.key      a second CA that signed nothing here: "the wrong CA"
#   server.pem server.key          a server certificate for 127.0.0.1, ::1 and localhost
#   wronghost.pem wronghost.key    signed by the CA, for elsewhere.invalid only (a name mismatch)
#   expired.pem expired.key        signed by the CA for 127.0.0.1/localhost, valid only in 2020
#   selfsigned.pem selfsigned.key  for 127.0.0.1/localhost, signed by its own key
#   client-<CN>.pem client-<CN>.key  a client certificate per CLIENT_CN (default: "flurry"),
#                                  signed by the CA, CN=<CN> (etcd maps the CN to its user)
#   other-client.pem other-client.key  CN=flurry, signed by other-ca (a client of the wrong CA)
#   client-nocn.pem client-nocn.key  signed by the CA, subject O=flurry test client and no CN
#                                  (a transport-only identity: etcd takes no user from it)
# and prints nothing on success; on failure openssl's own message and exit status 1.
set -euo pipefail

if [[ $# -lt 1 ]]; then
  echo "usage: $0 DIR [CLIENT_CN ...]" >&2
  exit 2
fi
dir=$1
shift
cns=("$@")
[[ ${#cns[@]} -gt 0 ]] || cns=(flurry)
mkdir -p "$dir"
cd "$dir"
umask 077
log=make_certs.log
: >"$log"

run() {
  if ! "$@" >>"$log" 2>&1; then
    echo "make_certs.sh: failed: $*" >&2
    cat "$log" >&2
    exit 1
  fi
}

key() { run openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

ca() {  # NAME SUBJECT
  key "$1.key"
  run openssl req -x509 -new -key "$1.key" -sha256 -days 30 -subj "$2" -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}

# leaf NAME CA CN EXTENSIONS: a certificate signed by CA, valid for 30 days from yesterday. A CN
# that starts with / is the whole subject.
leaf() {
  key "$1.key"
  local subject="/CN=$3"
  [[ $3 == /* ]] && subject=$3
  run openssl req -new -key "$1.key" -subj "$subject" -out "$1.csr"
  printf '%s\n' "$4" >"$1.ext"
  run openssl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -sha256 \
    -days 30 -extfile "$1.ext" -out "$1.pem"
  rm -f "$1.csr" "$1.ext"
}

server_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost"
client_ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"

ca ca "/CN=flurry test CA"
ca other-ca "/CN=flurry other test CA"
leaf server ca localhost "$server_ext"
leaf wronghost ca elsewhere.invalid "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:elsewhere.invalid"
for cn in "${cns[@]}"; do
  leaf "client-$cn" ca "$cn" "$client_ext"
done
leaf other-client other-ca flurry "$client_ext"
leaf client-nocn ca "/O=flurry test client" "$client_ext"

# Self-signed: its own issuer, trusted by nobody.
key selfsigned.key
run openssl req -x509 -new -key selfsigned.key -sha256 -days 30 -subj "/CN=localhost" \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -out selfsigned.pem

# Expired: `openssl ca` is the one command of OpenSSL 3.0 that sets both dates.
key expired.key
run openssl req -new -key expired.key -subj "/CN=localhost" -out expired.csr
mkdir -p ca-db
: >ca-db/index.txt
echo 1000 >ca-db/serial
cat >ca-db/ca.cnf <<EOF
[ca]
default_ca = test
[test]
database = ca-db/index.txt
serial = ca-db/serial
new_certs_dir = ca-db
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = ext
[any]
commonName = supplied
[ext]
basicConstraints = CA:FALSE
extendedKeyUsage = serverAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
EOF
run openssl ca -batch -config ca-db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
  -startdate 20200101000000Z -enddate 20200102000000Z -out expired.pem -notext
rm -rf ca-db expired.csr ca.srl other-ca.srl "$log"
chmod 0644 ./*.pem
