package pod

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"veclane.dev/cni/internal/testbin"
)

// The rule for a pod's namespace, against the real thing: namespaces where runtimes put
// them are taken; the host's (by /proc/1, by the test's own pid, or bind-mounted where a
// pod's would be), a namespace of another kind, a file that is no namespace, and paths
// elsewhere are refused, each saying why.
func TestOpenNetnsTakesPodNamespacesOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: needs root for network namespaces")
	}
	name := testbin.Netns(t, "vlpod")
	// A process in the pod's namespace, for the /proc/PID/ns/net form.
	sleeper := exec.Command("ip", "netns", "exec", name, "sleep", "60")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	podProc := fmt.Sprintf("/proc/%d/ns/net", sleeper.Process.Pid)
	// ip netns exec execs sleep in place: wait until it has entered the namespace.
	for i := 0; i < 200; i++ {
		a, _ := os.Stat(podProc)
		b, _ := os.Stat("/var/run/netns/" + name)
		if a != nil && b != nil && os.SameFile(a, b) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Files where a pod's namespace would be: the host's namespace, a UTS namespace, a plain file.
	bind := func(file, src string) string {
		p := "/run/netns/" + name + "-" + file
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Remove(p) })
		if src != "" {
			testbin.Run(t, "mount", "--bind", src, p)
			t.Cleanup(func() { _ = exec.Command("umount", p).Run() })
		}
		return p
	}
	self := fmt.Sprintf("/proc/%d/ns/", os.Getpid())
	hostBound, utsBound, plain := bind("host", self+"net"), bind("uts", self+"uts"), bind("plain", "")

	for _, good := range []string{"/var/run/netns/" + name, "/run/netns/" + name, podProc} {
		n, err := OpenNetns(good)
		if err != nil {
			t.Errorf("%s: %v", good, err)
			continue
		}
		n.Close()
	}
	for _, c := range []struct{ path, want string }{
		{self + "net", "is the host's"},
		{hostBound, "is the host's"},
		{utsBound, "not a network namespace"},
		{plain, "unknown FS magic"},
		{"/proc/self/ns/net", "not where runtimes put a pod's"},
		{"/proc/thread-self/ns/net", "not where runtimes put a pod's"},
		{"/var/run/netns/../../proc/1/ns/net", "not where runtimes put a pod's"},
		{"/var/run/netns/", "not where runtimes put a pod's"},
		{"/var/run/netns/a/b", "not where runtimes put a pod's"},
		{"/tmp/netns", "not where runtimes put a pod's"},
		{"netns/" + name, "not where runtimes put a pod's"},
	} {
		n, err := OpenNetns(c.path)
		if err == nil {
			n.Close()
			t.Errorf("%s: taken", c.path)
		} else if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.path, err, c.want)
		}
	}
	// Init's: the host's, or (where init is not ours to inspect, as in some sandboxes) not
	// open to us at all.
	if n, err := OpenNetns("/proc/1/ns/net"); err == nil {
		n.Close()
		t.Error("/proc/1/ns/net: taken")
	} else if !strings.Contains(err.Error(), "is the host's") && !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("/proc/1/ns/net: %v", err)
	}
	// A namespace that is gone says so, for the agent's "left for CNI DEL or GC".
	var gone ns.NSPathNotExistErr
	if _, err := OpenNetns("/var/run/netns/" + name + "-none"); !errors.As(err, &gone) {
		t.Errorf("a missing namespace: %v", err)
	}
}
