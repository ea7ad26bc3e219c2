#!/bin/sh
# Creates $TEMPORAL_NAMESPACE (default "default") once the server answers,
# and registers eve's search attributes on it (the commands `eve doctor`
# prints). Idempotent. Runs in temporalio/admin-tools, and in
# `make test-cluster` (test/cluster) with ./bin/temporal.
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
# eve's search attributes (workflows.SearchAttributeTypes; test/cluster checks
# this list against it). Workers enable them only when they are registered.
for sa in EveSessionId:Keyword EveStatus:Keyword EveTools:KeywordList EveInbox:Keyword EveRequester:Keyword EveRequestKinds:KeywordList EveParkedAt:Datetime; do
  name=${sa%%:*} type=${sa##*:}
  # A namespace just created may take a few seconds to reach every service.
  i=0
  until temporal operator search-attribute list -n "$ns" --address "$addr" 2>/dev/null | grep -qw "$name" ||
    temporal operator search-attribute create -n "$ns" --name "$name" --type "$type" --address "$addr"; do
    i=$((i + 1)); [ "$i" -lt 30 ] || { echo "cannot register search attribute $name"; exit 1; }
    sleep 2
  done
done
echo "namespace $ns ready"
