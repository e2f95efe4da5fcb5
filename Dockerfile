# syntax=docker/dockerfile:1
#
# mcpgw: a static binary on a distroless, non-root base (~15 MB).
#
#   docker build -t mcpgw --build-arg VERSION=$(git describe --tags --always) .
#   docker run --rm -p 8080:8080 -p 9091:9091 -v $PWD/mcpgw.yaml:/etc/mcpgw/config.yaml:ro mcpgw
#
# The image has no shell and no Node: stdio upstreams must be programs in the
# image. For servers launched with npx (most npm MCP servers), build
# Dockerfile.node instead. The config must listen on 0.0.0.0 (with auth) to be
# reachable from outside the container; see deploy/kubernetes/configmap.yaml.

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/root/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/mcpgw ./cmd/mcpgw \
 && /out/mcpgw version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mcpgw /usr/local/bin/mcpgw
# 65532:65532 is distroless's "nonroot" user.
USER 65532:65532
EXPOSE 8080 9091
# Needs the admin listener on 127.0.0.1:9091 (admin.listen or --admin-listen);
# the image has no curl, so the binary asks /readyz itself.
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s CMD ["/usr/local/bin/mcpgw", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mcpgw"]
CMD ["run", "--config", "/etc/mcpgw/config.yaml", "--log-format", "json"]
