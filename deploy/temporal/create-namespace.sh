#!/bin/sh
# Creates $TEMPORAL_NAMESPACE (default "default") once the server answers.
# Idempotent. Runs in temporalio/admin-tools.
set -eu
ns="${TEMPORAL_NAMESPACE:-default}"
addr="${TEMPORAL_ADDRESS:-temporal:7233}"
i=0
until temporal operator cluster health --address "$addr" >/dev/null 2>&1; do
  i=$((i + 1)); [ "$i" -lt 60 ] || { echo "Temporal not healthy at $addr"; exit 1; }
  sleep 2
done
temporal operator namespace describe -n "$ns" --address "$addr" >/dev/null 2>&1 ||
  temporal operator namespace create -n "$ns" --retention 72h --address "$addr"
echo "namespace $ns ready"
