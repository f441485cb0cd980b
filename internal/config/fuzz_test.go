package config

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

var errLineRE = regexp.MustCompile(`line (\d+):`)

// FuzzLoadBytes feeds arbitrary YAML to the config loader. It must never
// panic; an error must point at a line of the input; a config it accepts
// must print (Redacted) to a config it accepts again. The seed corpus is
// every config in testdata/ and deploy/, plus testdata/fuzz/FuzzLoadBytes.
func FuzzLoadBytes(f *testing.F) {
	for _, pattern := range []string{"testdata/*.yml", "../../deploy/slaprobe*.yml"} {
		files, _ := filepath.Glob(pattern)
		for _, file := range files {
			if b, err := os.ReadFile(file); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := LoadBytes(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			lines := bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) + 1 // YAML breaks lines at \r too
			for _, m := range errLineRE.FindAllStringSubmatch(err.Error(), -1) {
				if n, _ := strconv.Atoi(m[1]); n < 1 || n > lines+1 {
					t.Fatalf("error names line %d of a %d-line input: %v", n, lines, err)
				}
			}
			return
		}
		out := c.Redacted()
		if _, err := LoadBytes([]byte(out)); err != nil {
			t.Fatalf("the printed config does not load back: %v\ninput:\n%s\nprinted:\n%s", err, data, out)
		}
	})
}
