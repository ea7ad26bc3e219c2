# syntax=docker/dockerfile:1
# eve's worker and API server in one image:
#   docker build -t eve .
#   docker run eve worker         # Temporal worker (workflows + activities)
#   docker run eve eve serve      # the HTTP API (eve session protocol, tools API)
# Configuration comes from the environment: TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE,
# TEMPORAL_API_KEY, TEMPORAL_TLS_*, EVE_TASK_QUEUE, EVE_ADDR, EVE_API_KEY, and,
# the same on every worker and API server, EVE_ACTION_SECRET, EVE_PUBLIC_URL and
# EVE_PAYLOAD_STORE (docker-compose.yml keeps a file: store in /var/lib/eve).

# --- build -------------------------------------------------------------------
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so code changes don't re-download them.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/eve ./cmd/eve && \
    go build -trimpath -ldflags="-s -w" -o /out/worker ./cmd/worker

# --- runtime -----------------------------------------------------------------
FROM alpine:3.22
# CA certificates for model providers and Temporal Cloud; tzdata for timers in
# local time; wget (busybox) serves the health checks.
RUN apk add --no-cache ca-certificates tzdata && \
    addgroup -S -g 10001 eve && adduser -S -D -H -u 10001 -G eve eve && \
    mkdir -p /var/lib/eve && chown eve:eve /var/lib/eve
COPY --from=build /out/eve /out/worker /usr/local/bin/
USER eve:eve
ENV EVE_ADDR=0.0.0.0:4111 \
    EVE_METRICS_ADDR=0.0.0.0:9464
EXPOSE 4111 9464
# No ENTRYPOINT: the command names the binary (worker, or eve serve).
CMD ["eve", "serve"]
