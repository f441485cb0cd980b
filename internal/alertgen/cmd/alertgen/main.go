// Command alertgen writes slaprobe's rule files from internal/alertgen: the Prometheus rule file
// (alerts/slaprobe.rules.yml) and the Kubernetes PrometheusRule
// (deploy/kubernetes/slaprobe-prometheusrule.yaml). Run it from the repository root (`make rules`).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slaprobe/slaprobe/internal/alertgen"
)

func main() {
	root := flag.String("root", ".", "repository root the files are written under")
	flag.Parse()
	if err := alertgen.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "alertgen:", err)
		os.Exit(1)
	}
}
