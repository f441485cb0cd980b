package config

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/slaprobe/slaprobe/prober"
)

// Errors name the line they are about. YAML syntax and type errors carry
// one from the parser (made more precise here); errors found by validation
// name a field path such as targets[1].url or global.jitter, which is looked
// up in the document to find its line.

var lineRE = regexp.MustCompile(`\bline \d+\b`)

// withLine prefixes err with "line N: " when the field it names can be found
// in data. Errors that already carry a line, or name nothing in the file
// (a flag), are returned as they are.
func withLine(data []byte, err error) error {
	if err == nil || len(bytes.TrimSpace(data)) == 0 || lineRE.MatchString(err.Error()) {
		return err
	}
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return err
	}
	if line := errorLine(&root, err.Error()); line > 0 {
		return &lineError{line: line, err: err}
	}
	return err
}

// lineError is a validation error with the line of the field it names.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

var (
	// pathRE matches the field path an error starts with.
	pathRE = regexp.MustCompile(`^([a-z_]+(?:\[(?:\d+|"[^"]*")\])*(?:\.[a-z_]+(?:\[(?:\d+|"[^"]*")\])*)*)`)
	// subFieldRE matches what follows the path: an optional "(name)" and
	// `scenario "x":`, then the field the message is about.
	subFieldRE = regexp.MustCompile(`^(?: \([^)]*\))?: (?:scenario "[^"]*": )?(?:name "[^"]*" is used twice)?([a-z_]+)(?:=| is |: |\[)`)
	quotedRE   = regexp.MustCompile(`"([^"]*)"`)
	keyWordRE  = regexp.MustCompile(`[a-z][a-z_]+[a-z]`)
)

// errorLine finds the line of the field msg is about; 0 when unknown.
func errorLine(root *yaml.Node, msg string) int {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	msg = strings.TrimPrefix(msg, "parse config: ")
	if strings.HasPrefix(msg, "--") {
		return 0 // about a flag, not the file
	}
	m := pathRE.FindString(msg)
	if m == "" || !strings.ContainsAny(msg[len(m):len(m)+min(1, len(msg)-len(m))], "=:[. (") {
		return keywordLine(doc, msg)
	}
	path := splitPath(m)
	rest := msg[len(m):]
	if strings.HasPrefix(rest, ` (`) || strings.HasPrefix(rest, `: name "`) {
		if strings.Contains(rest, `: name "`) && strings.Contains(rest, "used twice") {
			path = append(path, "name")
		}
	}
	if sm := subFieldRE.FindStringSubmatch(rest); sm != nil && sm[1] != "" {
		path = append(path, sm[1])
	}
	// The deepest node of the path that is in the file.
	node, line := doc, 0
	for _, p := range path {
		next, l := child(node, p)
		if next == nil {
			break
		}
		node, line = next, l
	}
	if line == 0 {
		return keywordLine(doc, msg)
	}
	// A quoted value inside that node (an unknown name in a list) is
	// more precise still.
	for _, q := range quotedRE.FindAllStringSubmatch(rest, -1) {
		if s := findScalar(node, q[1]); s != nil {
			return s.Line
		}
	}
	return line
}

// keywordLine handles a message that names no path, such as one from
// http_client_config's own checks: the line of the first key of the file
// it mentions.
func keywordLine(doc *yaml.Node, msg string) int {
	for _, w := range keyWordRE.FindAllString(msg, -1) {
		if k := findKey(doc, w); k != nil {
			return k.Line
		}
	}
	return 0
}

// splitPath turns `targets[1].http_client_config` into
// [targets, [1], http_client_config].
func splitPath(p string) []string {
	var out []string
	for _, part := range strings.Split(p, ".") {
		name, idx, _ := strings.Cut(part, "[")
		out = append(out, name)
		for idx != "" {
			var one string
			one, idx, _ = strings.Cut(idx, "]")
			out = append(out, "["+one+"]")
			idx = strings.TrimPrefix(idx, "[")
		}
	}
	return out
}

// child steps into a mapping key or a sequence index ("[2]"), or a mapping
// key given as `["name"]`, returning the node and its line.
func child(n *yaml.Node, step string) (*yaml.Node, int) {
	if strings.HasPrefix(step, "[") {
		inner := strings.TrimSuffix(strings.TrimPrefix(step, "["), "]")
		if i, err := strconv.Atoi(inner); err == nil {
			if n.Kind == yaml.SequenceNode && i >= 0 && i < len(n.Content) {
				return n.Content[i], n.Content[i].Line
			}
			return nil, 0
		}
		step = strings.Trim(inner, `"`)
	}
	if n.Kind != yaml.MappingNode {
		return nil, 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == step {
			v := n.Content[i+1]
			if v.Kind == yaml.ScalarNode {
				return v, v.Line
			}
			return v, n.Content[i].Line
		}
	}
	return nil, 0
}

// findScalar returns the first scalar under n whose value is v.
func findScalar(n *yaml.Node, v string) *yaml.Node {
	if n.Kind == yaml.ScalarNode && n.Value == v {
		return n
	}
	for _, c := range n.Content {
		if s := findScalar(c, v); s != nil {
			return s
		}
	}
	return nil
}

// findKey returns the first mapping key under n named k.
func findKey(n *yaml.Node, k string) *yaml.Node {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				return n.Content[i]
			}
		}
	}
	for _, c := range n.Content {
		if f := findKey(c, k); f != nil {
			return f
		}
	}
	return nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError improves a YAML syntax error. The parser reports the line
// where the enclosing block starts (line 1 for a bad indent anywhere in
// `targets`); the line that breaks the document is the first line whose
// prefix of the file fails to parse with the same problem.
func syntaxError(data []byte, err error) error {
	sm := yamlLineRE.FindStringSubmatch(err.Error())
	if sm == nil {
		return fmt.Errorf("parse config: %w", err)
	}
	reported, _ := strconv.Atoi(sm[1])
	problem := sm[2]
	lines := bytes.SplitAfter(data, []byte("\n"))
	if len(lines) <= 5000 {
		for k := reported; k <= len(lines); k++ {
			var n yaml.Node
			perr := yaml.Unmarshal(bytes.Join(lines[:k], nil), &n)
			if perr == nil {
				continue
			}
			if psm := yamlLineRE.FindStringSubmatch(perr.Error()); psm != nil && psm[2] == problem {
				if k != reported {
					return fmt.Errorf("parse config: line %d: %s (in the block that starts on line %d); check the indentation",
						k, problem, reported)
				}
				break
			}
		}
	}
	hint := ""
	if reported >= 1 && reported <= len(lines) {
		l := lines[reported-1]
		if indent := l[:len(l)-len(bytes.TrimLeft(l, " \t"))]; bytes.ContainsRune(indent, '\t') {
			hint = "; the line is indented with a tab, expected spaces"
		}
	}
	return fmt.Errorf("parse config: line %d: %s%s", reported, problem, hint)
}

var typeErrRE = regexp.MustCompile("^line (\\d+): cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")

// typeNames say what a Go type expects, in the words of a config file.
var typeNames = map[string]string{
	"int": "a whole number", "int64": "a whole number", "float64": "a number", "bool": "true or false",
	"string": "a string", "[]string": "a list of strings", "prober.API": prober.QuotedAPIList(),
}

// typeError rewrites one of yaml.v3's "cannot unmarshal" messages to name
// the field, its value and what was expected.
func typeError(root *yaml.Node, m string) string {
	sm := typeErrRE.FindStringSubmatch(m)
	if sm == nil {
		return m
	}
	line, _ := strconv.Atoi(sm[1])
	want, ok := typeNames[sm[4]]
	if !ok {
		switch {
		case strings.HasPrefix(sm[4], "[]"):
			want = "a list"
		case strings.HasPrefix(sm[4], "map["), strings.Contains(sm[4], "Config"), strings.HasPrefix(sm[4], "config."):
			want = "a mapping (key: value lines)"
		default:
			want = sm[4]
		}
	}
	got := sm[3]
	if got == "" {
		got = map[string]string{"seq": "a list", "map": "a mapping"}[sm[2]]
		if got == "" {
			got = "!!" + sm[2]
		}
	}
	key := keyAt(root, line, sm[2], sm[3])
	if key == "" {
		return fmt.Sprintf("line %d: %q is not %s", line, got, want)
	}
	if sm[3] == "" {
		return fmt.Sprintf("line %d: %s is %s; expected %s", line, key, got, want)
	}
	return fmt.Sprintf("line %d: %s=%q; expected %s", line, key, got, want)
}

// keyAt is the key whose value of YAML kind tag ("str", "seq", "map") and
// text value starts on line; the innermost one when several do.
func keyAt(n *yaml.Node, line int, tag, value string) string {
	if n == nil {
		return ""
	}
	for _, c := range n.Content {
		if k := keyAt(c, line, tag, value); k != "" {
			return k
		}
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			v := n.Content[i+1]
			if v.Line != line {
				continue
			}
			switch {
			case v.Kind == yaml.ScalarNode && v.Value == value && value != "",
				v.Kind == yaml.SequenceNode && tag == "seq",
				v.Kind == yaml.MappingNode && tag == "map":
				return n.Content[i].Value
			}
		}
	}
	return ""
}
