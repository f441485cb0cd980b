# syntax=docker/dockerfile:1
# Build: docker build --build-arg VERSION=$(git describe --tags --always) --build-arg REVISION=$(git rev-parse HEAD) -t slaprobe .
# Run:   docker run -p 9781:9781 -v $PWD/slaprobe.yml:/etc/slaprobe/slaprobe.yml:ro slaprobe
# Demo:  docker run -p 9781:9781 slaprobe demo --web.listen-address=:9781   (demo listens on loopback by default)
# NVML: the binary loads libnvidia-ml at run time; with the NVIDIA container toolkit
# (docker run --gpus all) the GPU collector works, and without it the collector stays off.

# The builder's Debian release matches the runtime's: the binary links glibc dynamically (cgo).
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
# cgo on: go-nvml needs it.
RUN CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -trimpath \
      -ldflags "-X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION} -X github.com/prometheus/common/version.BuildUser=docker" \
      -o /out/slaprobe ./cmd/slaprobe

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 65532 slaprobe \
 && useradd --system --uid 65532 --gid slaprobe --home-dir /nonexistent --shell /usr/sbin/nologin slaprobe \
 && mkdir -p /etc/slaprobe
COPY --from=build /out/slaprobe /bin/slaprobe
USER 65532:65532
EXPOSE 9781
ENTRYPOINT ["/bin/slaprobe"]
CMD ["run", "--config.file=/etc/slaprobe/slaprobe.yml"]
