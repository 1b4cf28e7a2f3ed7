# syntax=docker/dockerfile:1
# Parley: a static binary on a minimal, non-root base.
#   docker build --build-arg VERSION=$(git describe --tags --always) -t parley .

FROM golang:1.26-bookworm AS build
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Builtin skills are embedded with go:embed, so the binary is all there is.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/parley ./cmd/parley \
 && mkdir -p /out/home /out/workspace

# distroless/static carries CA certificates and time-zone data and no shell:
# the health check is the binary itself (parley healthcheck).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/parley /usr/local/bin/parley
COPY --from=build --chown=65532:65532 /out/home /var/lib/parley
COPY --from=build --chown=65532:65532 /out/workspace /workspace
# No PARLEY_LISTEN: the variable would override the listen: of a mounted
# config file without a word. The binary's default, :8080, is the port
# below; a config file's listen: moves it, and parley healthcheck follows.
ENV PARLEY_HOME=/var/lib/parley \
    PARLEY_WORKSPACE=/workspace \
    PARLEY_LOG_FORMAT=json
VOLUME ["/var/lib/parley"]
WORKDIR /workspace
EXPOSE 8080
USER 65532:65532
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 CMD ["/usr/local/bin/parley", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/parley"]
CMD ["serve"]
