// Package promql reads just enough PromQL for tests: the metric names an expression selects, and
// the numbers written into it. The dashboard and rule tests use it to check every query against
// what slaprobe exports; it is no parser, and nothing outside tests imports it.
package promql

import (
	"sort"
	"strings"
)

// promqlKeywords are the identifiers of PromQL that are neither functions nor metric names.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"inf": true, "nan": true,
}

// groupingKeywords take a parenthesised label list, which holds label names, not metrics.
var groupingKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// MetricNames returns the metric names an expression selects, sorted and without duplicates: every
// identifier that is not a function, a keyword, a label name (in {…} or a grouping list), a string, a
// number, a duration or subquery range ([…]), or a Grafana variable ($…). Good enough for the
// dashboards' expressions, which Prometheus itself checks in test/e2e; not a full PromQL parser.
func MetricNames(expr string) []string {
	seen := map[string]bool{}
	i, n := 0, len(expr)
	for i < n {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipStringAt(expr, i)
		case c == '{':
			i = skipGroupAt(expr, i, '}')
		case c == '[':
			i = skipGroupAt(expr, i, ']')
		case c == '#': // comment to end of line
			for i < n && expr[i] != '\n' {
				i++
			}
		case c == '$': // a Grafana variable
			i++
			for i < n && (isIdentChar(expr[i]) || expr[i] == '{' || expr[i] == '}') {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < n && (isIdentChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < n && isIdentChar(expr[i]) {
				i++
			}
			word := expr[start:i]
			j := i
			for j < n && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n') {
				j++
			}
			nextParen := j < n && expr[j] == '('
			if !nextParen && j < n && isIdentStart(expr[j]) { // "sum by (…) (…)": an aggregation
				k := j
				for k < n && isIdentChar(expr[k]) {
					k++
				}
				next := strings.ToLower(expr[j:k])
				nextParen = next == "by" || next == "without"
			}
			switch {
			case groupingKeywords[strings.ToLower(word)]:
				if nextParen {
					i = skipGroupAt(expr, j, ')')
				}
			case promqlKeywords[strings.ToLower(word)]:
			case nextParen: // a function or an aggregation
			default:
				seen[word] = true
			}
		default:
			i++
		}
	}
	names := make([]string, 0, len(seen))
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// skipStringAt returns the index just past the string literal starting at i.
func skipStringAt(s string, i int) int {
	quote := s[i]
	i++
	for i < len(s) && s[i] != quote {
		if s[i] == '\\' && quote != '`' {
			i++
		}
		i++
	}
	return i + 1
}

// skipGroupAt returns the index just past the close that ends the group opened at i, skipping
// strings inside it.
func skipGroupAt(s string, i int, close byte) int {
	i++
	for i < len(s) && s[i] != close {
		if c := s[i]; c == '"' || c == '\'' || c == '`' {
			i = skipStringAt(s, i)
			continue
		}
		i++
	}
	return i + 1
}

// Numbers lists numeric literals outside strings, label matchers and ranges.
func Numbers(expr string) []string {
	var nums []string
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipStringAt(expr, i)
		case c == '{':
			i = skipGroupAt(expr, i, '}')
		case c == '[':
			i = skipGroupAt(expr, i, ']')
		case isIdentStart(c) || c == '$':
			for i++; i < len(expr) && isIdentChar(expr[i]); i++ {
			}
		case c >= '0' && c <= '9':
			start := i
			for ; i < len(expr) && (expr[i] >= '0' && expr[i] <= '9' || expr[i] == '.'); i++ {
			}
			nums = append(nums, expr[start:i])
		default:
			i++
		}
	}
	return nums
}
