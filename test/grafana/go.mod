module github.com/slaprobe/slaprobe/test/grafana

go 1.24

require github.com/grafana/grafana-foundation-sdk/go v0.0.0-20240326122733-6f96a993222b
