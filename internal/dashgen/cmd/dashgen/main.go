// Command dashgen writes slaprobe's Grafana dashboards: go run ./internal/dashgen/cmd/dashgen -out dashboards/
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/slaprobe/slaprobe/internal/dashgen"
)

func main() {
	out := flag.String("out", "dashboards", "directory to write the dashboard JSON files into")
	flag.Parse()
	if err := dashgen.Write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashgen:", err)
		os.Exit(1)
	}
}
