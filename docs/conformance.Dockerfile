# Image for the Kubernetes conformance Job: sharedos-run, its case set and the pinned
# harness CLIs. Build from the repository root:
#   docker build -f docs/conformance.Dockerfile -t sharedos-run-conformance:latest .
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -o /out/sharedos-run ./cmd/sharedos-run

FROM node:20-bookworm
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends iproute2 curl util-linux procps && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/sharedos-run
COPY scripts/ scripts/
COPY testdata/conformance/ testdata/conformance/
RUN scripts/install-harnesses.sh
COPY --from=build /out/sharedos-run bin/sharedos-run
ENV PATH=/opt/sharedos-run/bin:$PATH SHAREDOS_HARNESS_PREFIX=/opt/sharedos-run/.harnesses
WORKDIR /opt/sharedos-run
