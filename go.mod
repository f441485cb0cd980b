module github.com/slaprobe/slaprobe

go 1.26

require (
	github.com/NVIDIA/go-nvml v0.13.0-1 // indirect
	github.com/alecthomas/kingpin/v2 v2.4.0 // indirect
	github.com/alecthomas/units v0.0.0-20211218093645-b94a6e3cc137 // indirect
	github.com/prometheus/client_golang v1.23.2 // indirect
	github.com/prometheus/common v0.66.1 // indirect
	github.com/prometheus/exporter-toolkit v0.14.1 // indirect
	github.com/sashabaranov/go-openai v1.41.2 // indirect
	github.com/valyala/fastjson v1.6.4 // indirect
	github.com/xhit/go-str2duration/v2 v2.1.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
