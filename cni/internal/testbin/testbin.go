// Package testbin finds and builds the programs the tests run as a runtime or an operator
// would: the veclane daemon cargo built, and the module's own commands.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Veclane finds the daemon: $VECLANE_BIN, else the workspace's debug or release build
// (`root` is the workspace's directory, relative to the test's).
func Veclane(t testing.TB, root string) string {
	t.Helper()
	if b := os.Getenv("VECLANE_BIN"); b != "" {
		return b
	}
	for _, p := range []string{"target/debug/veclane", "target/release/veclane"} {
		p = filepath.Join(root, p)
		if _, err := os.Stat(p); err == nil {
			abs, _ := filepath.Abs(p)
			return abs
		}
	}
	t.Fatal("no veclane binary: build it (cargo build -p veclane) or set VECLANE_BIN")
	return ""
}

// Build compiles each package (a path or an import path) into dir under its name in
// `programs`; for a TestMain, which has no t: it returns the first failure.
func Build(dir string, programs map[string]string) error {
	for out, pkg := range programs {
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, out), pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}

// Main is a TestMain that builds `programs` into a temporary directory, puts its path in
// *dir, runs the tests and removes it.
func Main(m *testing.M, dir *string, programs map[string]string) {
	d, err := os.MkdirTemp("", "veclane-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*dir = d
	if err := Build(d, programs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(d)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(d)
	os.Exit(code)
}
