package pod

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// NetnsDirs are the directories a pod's network namespace may be bound in: where `ip netns`,
// containerd's CRI plugin (by default) and CRI-O pin them, and where cnitool users put them
// with `ip netns add`. containerd with `netns_mounts_under_state_dir = true` pins them under
// its state directory instead, which this rule refuses.
var NetnsDirs = []string{"/var/run/netns/", "/run/netns/"}

// procNetns is the other form runtimes pass (dockershim, nerdctl's hooks, cnitool given a
// process's namespace): a process's namespace, by number.
var procNetns = regexp.MustCompile(`^/proc/[1-9][0-9]*/ns/net$`)

// nsGetNSType is the nsfs ioctl NS_GET_NSTYPE, _IO(0xb7, 0x3) (linux/nsfs.h; x/sys/unix
// does not name it).
const nsGetNSType = 0xb703

// CheckNetnsPath says what is wrong with path as a pod's network namespace, if anything:
// it must be clean and either one name in one of NetnsDirs or /proc/PID/ns/net.
func CheckNetnsPath(path string) error {
	if filepath.Clean(path) == path {
		if procNetns.MatchString(path) {
			return nil
		}
		for _, d := range NetnsDirs {
			if name, ok := strings.CutPrefix(path, d); ok && name != "" && !strings.Contains(name, "/") {
				return nil
			}
		}
	}
	return fmt.Errorf("namespace path %q is not where runtimes put a pod's: expected %sNAME, %sNAME or /proc/PID/ns/net", path, NetnsDirs[0], NetnsDirs[1])
}

// OpenNetns opens the pod's network namespace at path, refusing a path outside the places
// CheckNetnsPath allows, a file that is not a network namespace, and the host's namespace
// (the agent's own, or init's): a pod's side is then configured through the namespace
// checked here, never through the path again. A path that does not exist is an
// ns.NSPathNotExistErr.
func OpenNetns(path string) (ns.NetNS, error) {
	if err := CheckNetnsPath(path); err != nil {
		return nil, err
	}
	target, err := ns.GetNS(path)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", path, err)
	}
	if err := checkPodNetns(path, int(target.Fd())); err != nil {
		_ = target.Close()
		return nil, err
	}
	return target, nil
}

// checkPodNetns checks the open namespace file fd: a network namespace on nsfs, and not the
// host's.
func checkPodNetns(path string, fd int) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return fmt.Errorf("namespace %s: %w", path, err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		return fmt.Errorf("namespace %s: not a namespace (file system magic %#x, not nsfs's)", path, fs.Type)
	}
	kind, err := unix.IoctlRetInt(fd, nsGetNSType)
	if err != nil {
		return fmt.Errorf("namespace %s: its type: %w", path, err)
	}
	if kind != unix.CLONE_NEWNET {
		return fmt.Errorf("namespace %s: not a network namespace", path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("namespace %s: %w", path, err)
	}
	for _, host := range []string{"/proc/self/ns/net", "/proc/1/ns/net"} {
		var h unix.Stat_t
		if err := unix.Stat(host, &h); err != nil {
			// Where init is not ours to inspect (a sandbox whose init is not dumpable), no
			// one else here can open its namespace either: /proc/self is then the host's.
			if host == "/proc/1/ns/net" && errors.Is(err, unix.EACCES) {
				continue
			}
			return fmt.Errorf("namespace %s: comparing with the host's (%s): %w", path, host, err)
		}
		if h.Dev == st.Dev && h.Ino == st.Ino {
			return fmt.Errorf("namespace %s is the host's (the same as %s): refused, a pod's interface never goes into the host's namespace", path, host)
		}
	}
	return nil
}

// CheckMemifSocket says what is wrong with a memif pod interface's socket, if anything: it
// must be abstract (`@NAME`), which lives in the pod's namespace and is the pod's alone. A
// path would be on the host's file system (the daemon's), where the daemon would make its
// directories and the socket as root.
func CheckMemifSocket(socket string) error {
	if len(socket) < 2 || socket[0] != '@' {
		return fmt.Errorf("memif socket %q is not abstract (@NAME): a path is on the host's file system", socket)
	}
	return nil
}
