package testproc

import "os"

// EnvTree is set by `make test` to a digest of the working tree (every file git tracks or would
// track) and of the programs the tests run (.tools/bin, the Debian packages): scripts/test.sh.
const EnvTree = "SLAPROBE_TEST_TREE"

// SeesTree tells go test's result cache that the test depends on more than its package's code and
// the files the test process opens itself: it runs a program that reads the repository (slaprobe's
// own binary with the examples, rules and dashboards) or one built or installed outside Go. go test
// keys a cached result by the environment variables the test read, so reading EnvTree makes it
// reuse the result only for the same tree and the same programs. Binary, SkipIfMissing, Start and
// Run call it; a test that starts a program another way calls it itself. Without `make test` the
// variable is empty, and go test's cache sees what it always sees.
func SeesTree() { _ = os.Getenv(EnvTree) }
