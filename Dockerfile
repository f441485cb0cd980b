# syntax=docker/dockerfile:1
# slaprobe's image: built with cgo (go-nvml), run on a glibc base with no shell, as a non-root user.
#
# Build: docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#          --build-arg REVISION=$(git rev-parse HEAD) --build-arg BRANCH=$(git rev-parse --abbrev-ref HEAD) -t slaprobe .
# Run:   docker run -p 9781:9781 -v $PWD/slaprobe.yml:/etc/slaprobe/slaprobe.yml:ro slaprobe
#   or:  docker run -p 9781:9781 slaprobe run --target.url=http://vllm:8000   (no config file)
# GPUs:  the binary loads libnvidia-ml at run time. With the NVIDIA container toolkit,
#          docker run --gpus all -e NVIDIA_DRIVER_CAPABILITIES=utility …
#        mounts the driver's NVML into the container and the power collector turns on; without it,
#        the collector stays off and says so in its metrics (docs/nvml.md).
#
# test/deploy checks this file's structure, and runs the build stage's `go build` command outside
# Docker (there is no Docker engine in CI): keep that command on one RUN line, with ${VERSION}-style
# build arguments only.

# The builder's Debian release matches the runtime's (bookworm = Debian 12): the binary links glibc.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG REVISION=unknown
ARG BRANCH=unknown
ARG BUILD_DATE=unknown
RUN CGO_ENABLED=1 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-X github.com/prometheus/common/version.Version=${VERSION} -X github.com/prometheus/common/version.Revision=${REVISION} -X github.com/prometheus/common/version.Branch=${BRANCH} -X github.com/prometheus/common/version.BuildUser=docker -X github.com/prometheus/common/version.BuildDate=${BUILD_DATE}" -o /out/slaprobe ./cmd/slaprobe

# distroless cc: glibc, libgcc, CA certificates, /etc/passwd with nonroot (65532); no shell, no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/slaprobe /bin/slaprobe
# Only with the NVIDIA container toolkit and --gpus: NVML needs the "utility" driver capability.
ENV NVIDIA_DRIVER_CAPABILITIES=utility
USER 65532:65532
EXPOSE 9781
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD ["/bin/slaprobe", "healthcheck"]
ENTRYPOINT ["/bin/slaprobe"]
CMD ["run", "--config.file=/etc/slaprobe/slaprobe.yml"]
