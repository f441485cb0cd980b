// Package deploy checks what operators install (the Dockerfile, deploy/compose, the Helm chart
// and the manifests rendered from it, the systemd unit) with the real parsers and API types:
// BuildKit's Dockerfile parser, compose-go, Helm's engine and the Kubernetes and Prometheus
// Operator types. It is a module of its own so that those heavy dependencies stay out of
// slaprobe's go.mod; `make test` runs it (go test ./... at the root does not descend into it).
package deploy
