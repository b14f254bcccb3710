// Package testbin finds, builds and runs the programs the tests run as a runtime or an
// operator would: the veclane daemon cargo built, and the module's own commands.
package testbin

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Veclane finds the daemon: $VECLANE_BIN, else the workspace's debug or release build (the
// workspace being the directory that holds this module's).
func Veclane(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("VECLANE_BIN"); b != "" {
		return b
	}
	root, err := workspace()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"target/debug/veclane", "target/release/veclane"} {
		p = filepath.Join(root, p)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatalf("no veclane binary in %s/target: build it (cargo build -p veclane) or set VECLANE_BIN", root)
	return ""
}

// workspace is the parent of the directory holding go.mod, found upwards from the test's
// directory.
func workspace() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Dir(dir), nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod above the test's directory")
		}
		dir = up
	}
}

// BlueAndRed is a daemon configuration (interrupt mode) with two networks of the same
// range, as the CNI plugin's tests want them: blue (VNI 56) and red (VNI 88), 10.1.0.0/16.
const BlueAndRed = `[daemon]
mode = "interrupt"
buffers = 4096

[[network]]
name = "blue"
vni = 56
ranges = ["10.1.0.0/16"]

[[network]]
name = "red"
vni = 88
ranges = ["10.1.0.0/16"]
`

// Daemon is a veclane daemon a test runs.
type Daemon struct {
	// Dir is its runtime directory, which holds its configuration and control socket.
	Dir string
	cmd *exec.Cmd
}

// StartDaemon runs `veclane run` with the configuration config (TOML) in dir, its runtime
// directory, behind the command wrap if given (`ip netns exec NS`), until the test ends or
// Kill, and waits until its control socket takes connections.
func StartDaemon(t testing.TB, dir, config string, wrap ...string) *Daemon {
	t.Helper()
	d := &Daemon{Dir: dir}
	cfg := filepath.Join(dir, "veclane.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(d.Socket())
	args := append(append([]string{}, wrap...), Veclane(t), "run", "--config", cfg, "--runtime-dir", dir)
	d.cmd = exec.Command(args[0], args[1:]...)
	d.cmd.Stderr = os.Stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Kill)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.Dial("unix", d.Socket())
		if err == nil {
			_ = c.Close()
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon in %s did not start within 20 s: %v", dir, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Socket is the daemon's control socket.
func (d *Daemon) Socket() string { return filepath.Join(d.Dir, "ctl.sock") }

// Kill kills the daemon with SIGKILL and waits for it (idempotent).
func (d *Daemon) Kill() {
	if d.cmd.Process != nil && d.cmd.ProcessState == nil {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	}
}

// Run runs a command (`ip netns add ...`) and returns its output; it fails the test with the
// output when the command fails.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return string(out)
}

// Netns makes the network namespace `prefix` + this process's id (tests of several packages
// run at once) for the life of t, and returns its name; its path is /var/run/netns/NAME.
func Netns(t testing.TB, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("%s%d", prefix, os.Getpid()%100000)
	Run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// programs are what tests build, by the name each is built as: the module's commands, and
// cnitool at the version go.mod's tool directive pins.
var programs = map[string]string{
	"veclane-agent": "veclane.dev/cni/cmd/veclane-agent",
	"veclane-cni":   "veclane.dev/cni/cmd/veclane-cni",
	"veclane-ipam":  "veclane.dev/cni/cmd/veclane-ipam",
	"cnitool":       "github.com/containernetworking/cni/cnitool",
}

// Build compiles the programs named into dir; for a TestMain, which has no t: it returns
// the first failure.
func Build(dir string, names ...string) error {
	for _, name := range names {
		pkg, ok := programs[name]
		if !ok {
			return fmt.Errorf("no program %q to build", name)
		}
		if b, err := exec.Command("go", "build", "-o", filepath.Join(dir, name), pkg).CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
		}
	}
	return nil
}

// Main is a TestMain that builds the programs named (veclane-agent, veclane-cni,
// veclane-ipam, cnitool) into a temporary directory, puts its path in *dir, runs the tests
// and removes it.
func Main(m *testing.M, dir *string, names ...string) {
	d, err := os.MkdirTemp("", "veclane-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*dir = d
	if err := Build(d, names...); err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = os.RemoveAll(d)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(d)
	os.Exit(code)
}
