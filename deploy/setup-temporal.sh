#!/bin/sh
# One-shot (service temporal-admin-tools): wait for the Temporal server, create
# the namespace if it is missing and register the search attributes the
# workflow sets (SEARCH_ATTRIBUTES="Name=Type ...", the same as
# client/devserver.py SEARCH_ATTRIBUTES). Safe to run again.
set -eu

: "${TEMPORAL_ADDRESS:=temporal:7233}"
: "${TEMPORAL_NAMESPACE:=default}"
: "${NAMESPACE_RETENTION:=168h}"
: "${SEARCH_ATTRIBUTES:=}"

echo "waiting for the Temporal server at ${TEMPORAL_ADDRESS}"
tries=0
until temporal operator cluster health --address "${TEMPORAL_ADDRESS}" >/dev/null 2>&1; do
  tries=$((tries + 1))
  if [ "${tries}" -ge 90 ]; then
    echo "the Temporal server at ${TEMPORAL_ADDRESS} did not become healthy" >&2
    exit 1
  fi
  sleep 2
done

if ! temporal operator namespace describe --address "${TEMPORAL_ADDRESS}" -n "${TEMPORAL_NAMESPACE}" >/dev/null 2>&1; then
  echo "creating namespace ${TEMPORAL_NAMESPACE} (retention ${NAMESPACE_RETENTION})"
  temporal operator namespace create --address "${TEMPORAL_ADDRESS}" -n "${TEMPORAL_NAMESPACE}" \
    --retention "${NAMESPACE_RETENTION}"
fi

for attribute in ${SEARCH_ATTRIBUTES}; do
  name="${attribute%%=*}"
  type="${attribute##*=}"
  tries=0
  # A new namespace can take a few seconds to be visible everywhere: retry.
  until temporal operator search-attribute list --address "${TEMPORAL_ADDRESS}" -n "${TEMPORAL_NAMESPACE}" \
      | grep -qw "${name}"; do
    tries=$((tries + 1))
    if [ "${tries}" -ge 30 ]; then
      echo "could not register search attribute ${name} (${type})" >&2
      exit 1
    fi
    echo "registering search attribute ${name} (${type})"
    temporal operator search-attribute create --address "${TEMPORAL_ADDRESS}" -n "${TEMPORAL_NAMESPACE}" \
      --name "${name}" --type "${type}" || sleep 2
  done
done
echo "namespace ${TEMPORAL_NAMESPACE} is ready: search attributes ${SEARCH_ATTRIBUTES}"
